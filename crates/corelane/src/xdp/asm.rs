//! A tiny eBPF instruction encoder with forward labels: enough to emit corelane's one XDP
//! program in process. Written here because the alternatives (aya/libbpf with an object built by
//! clang) would need clang at build time for ~50 instructions.

/// A register, r0 to r10.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reg(pub u8);

pub(crate) const R0: Reg = Reg(0);
pub(crate) const R1: Reg = Reg(1);
pub(crate) const R2: Reg = Reg(2);
pub(crate) const R3: Reg = Reg(3);
pub(crate) const R4: Reg = Reg(4);
pub(crate) const R5: Reg = Reg(5);
pub(crate) const R6: Reg = Reg(6);
pub(crate) const R10: Reg = Reg(10);

/// Access sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

/// ALU operations (64-bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alu {
    Add = 0x00,
    And = 0x50,
    Lsh = 0x60,
    Mov = 0xb0,
}

/// Conditional jumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cond {
    Eq = 0x10,
    Gt = 0x20,
    Ne = 0x50,
    Lt = 0xa0,
}

const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_JMP: u8 = 0x05;
const CLASS_JMP32: u8 = 0x06;
const CLASS_ALU64: u8 = 0x07;
const MODE_MEM: u8 = 0x60;
const MODE_IMM: u8 = 0x00;
const SRC_X: u8 = 0x08;
const OP_JA: u8 = 0x00;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;
/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate is a map's file descriptor.
const PSEUDO_MAP_FD: u8 = 1;

/// A jump target, placed once with [`Asm::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label(usize);

/// Instructions being assembled, with jumps to labels patched when the labels are bound.
#[derive(Debug, Default)]
pub(crate) struct Asm {
    insns: Vec<[u8; 8]>,
    labels: Vec<Option<usize>>,
    /// (instruction index, label) of every jump still to patch.
    fixups: Vec<(usize, Label)>,
}

fn encode(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> [u8; 8] {
    let regs = if cfg!(target_endian = "little") {
        (src.0 << 4) | (dst.0 & 0xf)
    } else {
        (dst.0 << 4) | (src.0 & 0xf)
    };
    let mut insn = [0u8; 8];
    insn[0] = code;
    insn[1] = regs;
    insn[2..4].copy_from_slice(&off.to_ne_bytes());
    insn[4..8].copy_from_slice(&imm.to_ne_bytes());
    insn
}

impl Asm {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Places `label` at the next instruction.
    pub(crate) fn bind(&mut self, label: Label) {
        self.labels[label.0] = Some(self.insns.len());
    }

    fn push(&mut self, insn: [u8; 8]) -> &mut Self {
        self.insns.push(insn);
        self
    }

    /// `dst op= imm` (64-bit).
    pub(crate) fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) -> &mut Self {
        self.push(encode(CLASS_ALU64 | op as u8, dst, R0, 0, imm))
    }

    /// `dst op= src` (64-bit).
    pub(crate) fn alu_reg(&mut self, op: Alu, dst: Reg, src: Reg) -> &mut Self {
        self.push(encode(CLASS_ALU64 | op as u8 | SRC_X, dst, src, 0, 0))
    }

    /// `dst = *(size *)(src + off)`.
    pub(crate) fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Self {
        self.push(encode(CLASS_LDX | MODE_MEM | size as u8, dst, src, off, 0))
    }

    /// `*(size *)(dst + off) = src`.
    pub(crate) fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(encode(CLASS_STX | MODE_MEM | size as u8, dst, src, off, 0))
    }

    /// `*(size *)(dst + off) = imm`.
    pub(crate) fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.push(encode(CLASS_ST | MODE_MEM | size as u8, dst, R0, off, imm))
    }

    /// `dst = map` (a 64-bit immediate the kernel resolves from the map's descriptor).
    pub(crate) fn load_map(&mut self, dst: Reg, map_fd: i32) -> &mut Self {
        self.push(encode(CLASS_LD | MODE_IMM | Size::DW as u8, dst, Reg(PSEUDO_MAP_FD), 0, map_fd));
        self.push([0; 8])
    }

    fn jump_insn(&mut self, code: u8, dst: Reg, src: Reg, imm: i32, to: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), to));
        self.push(encode(code, dst, src, 0, imm))
    }

    /// `if dst cond imm goto to` (64-bit compare, `imm` sign-extended).
    pub(crate) fn jump_imm(&mut self, cond: Cond, dst: Reg, imm: i32, to: Label) -> &mut Self {
        self.jump_insn(CLASS_JMP | cond as u8, dst, R0, imm, to)
    }

    /// `if (u32)dst cond (u32)imm goto to`.
    pub(crate) fn jump32_imm(&mut self, cond: Cond, dst: Reg, imm: u32, to: Label) -> &mut Self {
        self.jump_insn(CLASS_JMP32 | cond as u8, dst, R0, imm as i32, to)
    }

    /// `if dst cond src goto to`.
    pub(crate) fn jump_reg(&mut self, cond: Cond, dst: Reg, src: Reg, to: Label) -> &mut Self {
        self.jump_insn(CLASS_JMP | cond as u8 | SRC_X, dst, src, 0, to)
    }

    pub(crate) fn goto(&mut self, to: Label) -> &mut Self {
        self.jump_insn(CLASS_JMP | OP_JA, R0, R0, 0, to)
    }

    /// Calls BPF helper number `helper`.
    pub(crate) fn call(&mut self, helper: i32) -> &mut Self {
        self.push(encode(CLASS_JMP | OP_CALL, R0, R0, 0, helper))
    }

    pub(crate) fn exit(&mut self) -> &mut Self {
        self.push(encode(CLASS_JMP | OP_EXIT, R0, R0, 0, 0))
    }

    /// The program as the kernel takes it; `None` if a jump's label was never bound or is
    /// out of a jump's reach (neither happens for corelane's fixed program shape).
    pub(crate) fn finish(mut self) -> Option<Vec<u64>> {
        for &(at, label) in &self.fixups {
            let target = self.labels[label.0]?;
            let off = i16::try_from(target as i64 - at as i64 - 1).ok()?;
            self.insns[at][2..4].copy_from_slice(&off.to_ne_bytes());
        }
        Some(self.insns.iter().map(|i| u64::from_ne_bytes(*i)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel_headers() {
        // BPF_MOV64_IMM(BPF_REG_0, 2) and BPF_EXIT_INSN() as the kernel's macros spell them.
        let mut a = Asm::new();
        a.alu_imm(Alu::Mov, R0, 2).exit();
        let p = a.finish().unwrap();
        assert_eq!(p[0].to_ne_bytes(), [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
        assert_eq!(p[1].to_ne_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn forward_and_backward_jumps_are_relative_to_the_next_instruction() {
        let mut a = Asm::new();
        let (back, fwd) = (a.label(), a.label());
        a.bind(back);
        a.jump_imm(Cond::Eq, R1, 0, fwd); // 0 -> 2: off 1
        a.goto(back); // 1 -> 0: off -2
        a.bind(fwd);
        a.exit();
        let p = a.finish().unwrap();
        assert_eq!(i16::from_ne_bytes([p[0].to_ne_bytes()[2], p[0].to_ne_bytes()[3]]), 1);
        assert_eq!(i16::from_ne_bytes([p[1].to_ne_bytes()[2], p[1].to_ne_bytes()[3]]), -2);
    }

    #[test]
    fn an_unbound_label_is_refused() {
        let mut a = Asm::new();
        let l = a.label();
        a.goto(l);
        assert!(a.finish().is_none());
    }
}
