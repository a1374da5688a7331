//! The firmware tables the kernel reads: the PVH start info's memory map (e820 entries)
//! and, from ACPI, the MADT (local APIC ids of the enabled CPUs) and the SRAT (the NUMA
//! node of each CPU and memory range). Identity-mapped physical memory is read directly.

use alloc::vec::Vec;

/// One e820 entry of the PVH memory map.
#[derive(Clone, Copy, Debug)]
pub struct E820 {
    /// Base address.
    pub addr: u64,
    /// Size, bytes.
    pub size: u64,
    /// 1: usable RAM; anything else reserved.
    pub kind: u32,
}

/// What the kernel learns from the firmware.
#[derive(Debug, Default)]
pub struct Firmware {
    /// The memory map.
    pub e820: Vec<E820>,
    /// Local APIC ids of the enabled CPUs, MADT order (the BSP first on QEMU).
    pub apic_ids: Vec<u32>,
    /// SRAT: (APIC id, proximity domain) of each CPU.
    pub cpu_node: Vec<(u32, u32)>,
    /// SRAT: (base, length, proximity domain) of each enabled memory range.
    pub mem_node: Vec<(u64, u64, u32)>,
}

fn rd<T: Copy>(addr: u64) -> T {
    // SAFETY: firmware tables lie in the identity-mapped low 4 GiB and are only read;
    // unaligned reads are allowed by `read_unaligned`.
    unsafe { (addr as *const T).read_unaligned() }
}

/// Read the PVH start info at `info` (`hvm_start_info`, version 1: memory map and RSDP).
pub fn read(info: u64) -> Result<Firmware, &'static str> {
    if rd::<u32>(info) != 0x336e_c578 {
        return Err("no PVH start info (bad magic)");
    }
    let version = rd::<u32>(info + 4);
    let mut fw = Firmware::default();
    if version >= 1 {
        let map = rd::<u64>(info + 40);
        let n = rd::<u32>(info + 48);
        for k in 0..n as u64 {
            let e = map + k * 24;
            fw.e820.push(E820 {
                addr: rd(e),
                size: rd(e + 8),
                kind: rd(e + 16),
            });
        }
    }
    if fw.e820.is_empty() {
        return Err("the PVH start info has no memory map");
    }
    let mut rsdp = rd::<u64>(info + 32);
    if rsdp == 0 {
        rsdp = (0xe_0000u64..0x10_0000)
            .step_by(16)
            .find(|&a| rd::<[u8; 8]>(a) == *b"RSD PTR ")
            .ok_or("no ACPI RSDP")?;
    }
    let rev = rd::<u8>(rsdp + 15);
    let (root, wide) = if rev >= 2 && rd::<u64>(rsdp + 24) != 0 {
        (rd::<u64>(rsdp + 24), true)
    } else {
        (rd::<u32>(rsdp + 16) as u64, false)
    };
    let len = rd::<u32>(root + 4) as u64;
    let step = if wide { 8 } else { 4 };
    let mut a = root + 36;
    while a + step <= root + len {
        let t = if wide {
            rd::<u64>(a)
        } else {
            rd::<u32>(a) as u64
        };
        match &rd::<[u8; 4]>(t) {
            b"APIC" => madt(t, &mut fw),
            b"SRAT" => srat(t, &mut fw),
            _ => {}
        }
        a += step;
    }
    if fw.apic_ids.is_empty() {
        return Err("the MADT lists no enabled CPU");
    }
    Ok(fw)
}

fn madt(t: u64, fw: &mut Firmware) {
    let end = t + rd::<u32>(t + 4) as u64;
    let mut e = t + 44;
    while e + 2 <= end {
        let (kind, len) = (rd::<u8>(e), rd::<u8>(e + 1) as u64);
        if len < 2 {
            break;
        }
        if kind == 0 && rd::<u32>(e + 4) & 1 != 0 {
            fw.apic_ids.push(rd::<u8>(e + 3) as u32);
        }
        e += len;
    }
}

fn srat(t: u64, fw: &mut Firmware) {
    let end = t + rd::<u32>(t + 4) as u64;
    let mut e = t + 48;
    while e + 2 <= end {
        let (kind, len) = (rd::<u8>(e), rd::<u8>(e + 1) as u64);
        if len < 2 {
            break;
        }
        match kind {
            0 if rd::<u32>(e + 4) & 1 != 0 => {
                let dom = rd::<u8>(e + 2) as u32
                    | (rd::<[u8; 3]>(e + 9)
                        .iter()
                        .rev()
                        .fold(0u32, |a, &b| a << 8 | b as u32)
                        << 8);
                fw.cpu_node.push((rd::<u8>(e + 3) as u32, dom));
            }
            1 if rd::<u32>(e + 28) & 1 != 0 => {
                let base = rd::<u32>(e + 8) as u64 | (rd::<u32>(e + 12) as u64) << 32;
                let size = rd::<u32>(e + 16) as u64 | (rd::<u32>(e + 20) as u64) << 32;
                fw.mem_node.push((base, size, rd::<u32>(e + 2)));
            }
            _ => {}
        }
        e += len;
    }
}
