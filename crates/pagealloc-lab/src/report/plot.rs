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

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points, drawn in order.
    pub points: Vec<(f64, f64)>,
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
    /// Logarithmic (base 2) x axis.
    pub log_x: bool,
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
/// A drawing or file error, as text.
pub fn write(chart: &Chart, stem: &Path) -> Result<Vec<PathBuf>, String> {
    register_font();
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, (960, 600)).into_drawing_area();
        draw(chart, root).map_err(|e| format!("{}: {e}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (960, 600)).into_drawing_area();
        draw(chart, root).map_err(|e| format!("{}: {e}", svg.display()))?;
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
    let pts = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x0 == x1 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let tx = |x: f64| if chart.log_x { x.max(1e-9).log2() } else { x };
    let (lx0, lx1) = (tx(x0), tx(x1));
    let mut cc = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(lx0..lx1, 0.0..y1)?;
    let log_x = chart.log_x;
    // Whole-number x data (CPUs): one label per whole number, no fractions between.
    let whole = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .all(|&(x, _)| x.fract() == 0.0);
    let x_labels = if whole && !log_x && x1 - x0 <= 16.0 {
        (x1 - x0) as usize + 1
    } else {
        10
    };
    cc.configure_mesh()
        .x_labels(x_labels)
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", 14))
        .x_label_formatter(&|v| {
            let x = if log_x { v.exp2() } else { *v };
            axis_num(x)
        })
        .y_label_formatter(&|v| axis_num(*v))
        .draw()?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let data: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (tx(x), y)).collect();
        cc.draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        if data.len() <= 40 {
            cc.draw_series(data.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
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

/// An axis label: whole numbers without decimals.
fn axis_num(v: f64) -> String {
    if v.is_finite() && (v - v.round()).abs() < 1e-6 * v.abs().max(1.0) {
        crate::report::fmt_num(v.round())
            .trim_end_matches(".0")
            .to_owned()
    } else {
        crate::report::fmt_num(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_png_and_svg_with_text() {
        let dir = std::env::temp_dir().join(format!("pagealloc-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let chart = Chart {
            title: "throughput vs CPUs".into(),
            x_label: "CPUs".into(),
            y_label: "pages/s".into(),
            log_x: false,
            series: vec![
                Series {
                    name: "pagealloc".into(),
                    points: vec![(1.0, 10.0), (2.0, 19.0)],
                },
                Series {
                    name: "kernel".into(),
                    points: vec![(1.0, 5.0), (2.0, 8.0)],
                },
            ],
        };
        let files = write(&chart, &dir.join("t")).unwrap();
        let png = std::fs::read(&files[0]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("throughput vs CPUs"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
