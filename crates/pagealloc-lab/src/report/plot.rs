//! Line charts as PNG and SVG (plotters).
//!
//! # Fonts
//! PNG text needs a font file and a fresh machine may have none (`fc-list` empty on CI),
//! so plotters draws with `ab_glyph` from DejaVu Sans as shipped inside the `dejavu`
//! crate, registered once as `sans-serif`. SVG text is written as text and rendered by
//! the viewer.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use super::ReportError;

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (a second config or a bound beside the solid lines).
    pub dashed: bool,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Place the distinct x values evenly, in order, labelled with their values (for
    /// sweeps over powers of two this is a log2 axis with exact labels).
    pub x_ranked: bool,
    /// Logarithmic (base 10) y axis: for latencies whose tail is orders of magnitude
    /// above their average. Values <= 0 are left out.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            // The bytes are a valid TrueType font: registration cannot fail.
            let _ = plotters::style::register_font("sans-serif", style, dejavu::sans::regular());
        }
    });
}

/// Writes `chart` as `<stem>.png` and `<stem>.svg`; returns both paths.
///
/// # Errors
/// A drawing or file error.
pub fn write(chart: &Chart, stem: &Path) -> Result<Vec<PathBuf>, ReportError> {
    register_font();
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, (960, 600)).into_drawing_area();
        draw(chart, root).map_err(|e| ReportError::plot(&png, e))?;
    }
    {
        let root = SVGBackend::new(&svg, (960, 600)).into_drawing_area();
        draw(chart, root).map_err(|e| ReportError::plot(&svg, e))?;
    }
    Ok(vec![png, svg])
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw<DB: DrawingBackend>(
    chart: &Chart,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let log_y = chart.log_y;
    let keep = |&&(_, y): &&(f64, f64)| !log_y || y > 0.0;
    let pts = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(keep);
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let (mut y0, mut y1) = (f64::MAX, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x0 == x1 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let mut ranks: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    ranks.sort_by(f64::total_cmp);
    ranks.dedup();
    let x_ranked = chart.x_ranked && !ranks.is_empty();
    let tx = |x: f64| {
        if x_ranked {
            ranks.partition_point(|&r| r < x) as f64
        } else {
            x
        }
    };
    let ty = |y: f64| if log_y { y.log10() } else { y };
    let (ly0, ly1) = if log_y {
        if y0 > y1 {
            (0.0, 1.0)
        } else {
            // Whole decades around the data.
            (
                y0.log10().floor(),
                y1.log10().ceil().max(y0.log10().floor() + 1.0),
            )
        }
    } else {
        (0.0, if y1 > 0.0 { y1 * 1.1 } else { 1.0 })
    };
    let (lx0, lx1) = if x_ranked {
        let n = ranks.len() as f64;
        if n > 1.0 {
            (0.0, n - 1.0)
        } else {
            (-0.5, 0.5)
        }
    } else {
        (tx(x0), tx(x1))
    };
    let mut cc = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(lx0..lx1, ly0..ly1)?;
    // Whole-number x data (CPUs): one label per whole number, no fractions between.
    let whole = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .all(|&(x, _)| x.fract() == 0.0);
    let x_labels = if x_ranked {
        ranks.len()
    } else if whole && x1 - x0 <= 16.0 {
        (x1 - x0) as usize + 1
    } else {
        10
    };
    let y_labels = if log_y { (ly1 - ly0) as usize + 1 } else { 10 };
    // One number of decimals per axis, from the spacing of its ticks (about a tenth of
    // its range), so that an axis never mixes `0.500`, `1` and `1.50`.
    let x_dec = if whole {
        0
    } else {
        decimals((lx1 - lx0) / 10.0)
    };
    let y_dec = decimals((ly1 - ly0) / 10.0);
    cc.configure_mesh()
        .x_labels(x_labels)
        .y_labels(y_labels)
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", 14))
        .x_label_formatter(&|v| {
            if !x_ranked {
                tick(*v, x_dec)
            } else if (v - v.round()).abs() < 1e-6 && v.round() >= 0.0 {
                ranks
                    .get(v.round() as usize)
                    .map_or_else(String::new, |&x| axis_num(x))
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| {
            if log_y {
                axis_num(10f64.powf(*v))
            } else {
                tick(*v, y_dec)
            }
        })
        .draw()?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let data: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(keep)
            .map(|&(x, y)| (tx(x), ty(y)))
            .collect();
        let style = color.stroke_width(2);
        let legend = if s.dashed {
            cc.draw_series(DashedLineSeries::new(data.clone(), 8, 5, style))?
        } else {
            cc.draw_series(LineSeries::new(data.clone(), style))?
        };
        legend.label(s.name.clone()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
        });
        // Every point of a short line is marked, so that a line between two points reads
        // as two measurements, not a curve.
        if data.len() <= 40 {
            cc.draw_series(data.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
        }
    }
    cc.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Decimals that tell apart ticks `step` apart: 0 from 1 on, 1 from 0.1, ….
fn decimals(step: f64) -> usize {
    if !(step.is_finite() && step > 0.0) || step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil().clamp(0.0, 6.0) as usize
    }
}

/// A linear axis' tick with `dec` decimals (thousands grouped when whole).
fn tick(v: f64, dec: usize) -> String {
    if dec == 0 {
        axis_num(v.round())
    } else {
        format!("{v:.dec$}")
    }
}

/// An axis label: whole numbers without decimals, thousands grouped from 1 000 on (so
/// one axis never mixes `4000` and `12 000`).
fn axis_num(v: f64) -> String {
    if v.is_finite() && (v - v.round()).abs() < 1e-6 * v.abs().max(1.0) {
        let r = v.round();
        if r.abs() >= 1000.0 {
            crate::report::group_thousands(&format!("{r:.0}"))
        } else {
            format!("{r:.0}")
        }
    } else {
        crate::report::fmt_num(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text labels of an SVG the chart writer made.
    fn svg_texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').and_then(|(_, r)| r.split('<').next()))
            .map(str::trim)
            .collect()
    }

    #[test]
    fn writes_png_and_svg_with_text() {
        let dir = std::env::temp_dir().join(format!("pagealloc-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let chart = Chart {
            title: "throughput vs CPUs".into(),
            x_label: "CPUs".into(),
            y_label: "pages/s".into(),
            x_ranked: false,
            log_y: false,
            series: vec![
                Series {
                    name: "pagealloc".into(),
                    points: vec![(1.0, 10.0), (2.0, 19.0)],
                    dashed: false,
                },
                Series {
                    name: "kernel".into(),
                    points: vec![(1.0, 5.0), (2.0, 8.0)],
                    dashed: true,
                },
            ],
        };
        let files = write(&chart, &dir.join("t")).unwrap();
        let png = std::fs::read(&files[0]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("throughput vs CPUs"));
        // log y: decades, zeros left out
        let log = Chart {
            x_ranked: true,
            log_y: true,
            series: vec![Series {
                name: "p99".into(),
                points: vec![(63.0, 0.0), (127.0, 3.5), (255.0, 12000.0)],
                dashed: false,
            }],
            ..chart
        };
        let files = write(&log, &dir.join("l")).unwrap();
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        let texts = svg_texts(&svg);
        for label in ["1", "10", "100 000", "63", "127", "255"] {
            assert!(
                texts.contains(&label),
                "label {label} missing from {texts:?}"
            );
        }
        assert!(
            !texts.iter().any(|t| t.contains('.')),
            "whole labels only: {texts:?}"
        );
        // Fractional x (seconds): every tick with the same number of decimals.
        let secs = Chart {
            x_ranked: false,
            log_y: false,
            series: vec![Series {
                name: "high".into(),
                points: vec![(0.0, 3500.0), (1.05, 12000.0), (2.1, 3500.0)],
                dashed: false,
            }],
            ..log
        };
        let files = write(&secs, &dir.join("s")).unwrap();
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        let texts = svg_texts(&svg);
        for label in ["0.5", "1.0", "1.5", "2.0", "4 000", "12 000"] {
            assert!(
                texts.contains(&label),
                "label {label} missing from {texts:?}"
            );
        }
        assert!(
            !texts
                .iter()
                .any(|t| *t == "0.500" || *t == "1.50" || *t == "4000"),
            "mixed formats: {texts:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
