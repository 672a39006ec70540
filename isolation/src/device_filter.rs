//! The cgroup v2 device filter: a small eBPF program (`BPF_PROG_TYPE_CGROUP_DEVICE`) attached
//! to a job's cgroup, which refuses the character devices given to it (other jobs' GPUs) and
//! lets every other device through, as the v1 `devices.deny` rules do.
//!
//! It is written as raw instructions and loaded with the `bpf(2)` system call: the program is
//! a dozen instructions, and a BPF toolchain or loader crate would be far larger than it. The
//! program stays attached for as long as the cgroup lives; removing the cgroup removes it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const BPF_PROG_LOAD: i64 = 5;
const BPF_PROG_ATTACH: i64 = 8;
const BPF_PROG_DETACH: i64 = 9;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
/// `BPF_DEVCG_DEV_CHAR`, in the low 16 bits of the context's `access_type`.
const DEV_CHAR: i32 = 2;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// `rD = *(u32 *)(r1 + off)`: a field of `struct bpf_cgroup_dev_ctx`.
fn load_ctx(dst: u8, off: i16) -> Insn {
    insn(0x61, dst, 1, off, 0)
}

/// The program: allow (1) unless the access is to a character device `major:minor` with the
/// minor in `denied`, then deny (0).
fn program(major: u32, denied: &[u32]) -> Vec<Insn> {
    let n = denied.len() as i16;
    let mut p = vec![
        load_ctx(2, 0),                        // r2 = access_type
        insn(0x57, 2, 0, 0, 0xffff),           // r2 &= 0xffff (device type)
        insn(0x55, 2, 0, 3 + n, DEV_CHAR),     // if r2 != char goto allow
        load_ctx(3, 4),                        // r3 = major
        insn(0x55, 3, 0, 1 + n, major as i32), // if r3 != major goto allow
        load_ctx(4, 8),                        // r4 = minor
    ];
    for (i, minor) in denied.iter().enumerate() {
        // if r4 == minor goto deny (past the remaining tests and the allow block)
        p.push(insn(0x15, 4, 0, (n - i as i16 - 1) + 2, *minor as i32));
    }
    p.push(insn(0xb7, 0, 0, 0, 1)); // allow: r0 = 1
    p.push(insn(0x95, 0, 0, 0, 0)); // exit
    p.push(insn(0xb7, 0, 0, 0, 0)); // deny: r0 = 0
    p.push(insn(0x95, 0, 0, 0, 0)); // exit
    p
}

/// `union bpf_attr` as `BPF_PROG_LOAD` reads it (the kernel takes trailing zeros).
#[repr(C)]
struct LoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    _rest: [u8; 56],
}

/// `union bpf_attr` as `BPF_PROG_ATTACH` reads it.
#[repr(C)]
struct AttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
    _rest: [u8; 108],
}

/// `BPF_F_ALLOW_MULTI`: one program per major number, all of which must allow.
const BPF_F_ALLOW_MULTI: u32 = 2;

fn bpf<T>(cmd: i64, attr: &mut T) -> io::Result<i64> {
    // SAFETY: `attr` is a fully initialised #[repr(C)] bpf_attr of the size passed.
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Loads the filter denying `major:minor` for each minor in `denied`.
fn load(major: u32, denied: &[u32]) -> io::Result<OwnedFd> {
    let insns = program(major, denied);
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let mut name = [0u8; 16];
    name[..11].copy_from_slice(b"labpool_dev");
    let mut attr = LoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
        prog_ifindex: 0,
        expected_attach_type: BPF_CGROUP_DEVICE,
        _rest: [0; 56],
    };
    let fd = bpf(BPF_PROG_LOAD, &mut attr).map_err(|e| {
        let verifier = String::from_utf8_lossy(&log);
        let verifier = verifier.trim_end_matches('\0').trim();
        io::Error::new(
            e.kind(),
            format!("the kernel refused the device filter program: {e} {verifier}"),
        )
    })?;
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Attaches a filter denying `major:minor` (each minor in `denied`) to the cgroup v2 directory
/// `cgroup`. It applies to every process in the group from then on.
pub fn attach(cgroup: &Path, major: u32, denied: &[u32]) -> io::Result<()> {
    attach_held(cgroup, major, denied).map(drop)
}

/// Like [`attach`], keeping the program's descriptor: [`detach`] takes it off again.
pub fn attach_held(cgroup: &Path, major: u32, denied: &[u32]) -> io::Result<OwnedFd> {
    let prog = load(major, denied)?;
    let dir = std::fs::File::open(cgroup)?;
    let mut attr = AttachAttr {
        target_fd: dir.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
        replace_bpf_fd: 0,
        _rest: [0; 108],
    };
    bpf(BPF_PROG_ATTACH, &mut attr).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot attach the device filter to {}: {e}",
                cgroup.display()
            ),
        )
    })?;
    Ok(prog)
}

/// Takes the program `prog`, attached with [`attach_held`], off the cgroup directory `cgroup`.
pub fn detach(cgroup: &Path, prog: &OwnedFd) -> io::Result<()> {
    let dir = std::fs::File::open(cgroup)?;
    let mut attr = AttachAttr {
        target_fd: dir.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: 0,
        replace_bpf_fd: 0,
        _rest: [0; 108],
    };
    bpf(BPF_PROG_DETACH, &mut attr).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot detach the device filter from {}: {e}",
                cgroup.display()
            ),
        )
    })?;
    Ok(())
}

/// True when this kernel loads device filters (root, BPF enabled).
pub fn available() -> bool {
    load(195, &[0]).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_allow_and_deny() {
        let p = program(195, &[1, 3]);
        // 6 header instructions, 2 tests, allow (2), deny (2).
        assert_eq!(p.len(), 12);
        let allow = 8;
        let deny = 10;
        assert_eq!(2 + 1 + p[2].off as usize, allow);
        assert_eq!(4 + 1 + p[4].off as usize, allow);
        assert_eq!(6 + 1 + p[6].off as usize, deny);
        assert_eq!(7 + 1 + p[7].off as usize, deny);
        assert_eq!((p[8].code, p[8].imm), (0xb7, 1));
        assert_eq!((p[10].code, p[10].imm), (0xb7, 0));
    }
}
