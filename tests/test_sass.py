"""tests/sass.py, the reader of sm90 machine code that the nvcc tests use, on small hand-written listings."""

from __future__ import annotations

from sass import wgmma_loops

LISTING = """
        Function : kernel_a
        /*0010*/                   MOV R1, c[0x0][0x28] ;
        /*0020*/                   UIADD3 UR4, UR12, 0x2, URZ ;
        /*0030*/                   HGMMA.64x128x16.F32 R88, gdesc[UR4].tnspB, R88, gsb0 ;
        /*0040*/                   HGMMA.64x128x16.F32 R24, gdesc[UR8].tnspB, R24, gsb0 ;
        /*0050*/              @P1 BRA 0x20 ;
        /*0060*/                   EXIT ;
        Function : kernel_b
        /*0010*/                   IMAD R4, R0, 0x400, R14 ;
        /*0020*/                   R2UR UR4, R4 ;
        /*0030*/                   R2UR UR5, R5 ;
        /*0040*/                   HGMMA.64x128x16.F32 R88, gdesc[UR4].tnspB, R88, gsb0 ;
        /*0050*/              @P1 BRA 0x10 ;
        /*0060*/                   LDS R3, [R2] ;
        /*0070*/              @P2 BRA 0x0 ;
        Function : kernel_c
        /*0010*/                   FADD R1, R2, R3 ;
        /*0020*/              @P1 BRA 0x10 ;
"""


def test_the_innermost_wgmma_loop_of_each_kernel() -> None:
    loops = {loop.kernel: loop for loop in wgmma_loops(LISTING)}
    assert set(loops) == {"kernel_a", "kernel_b"}  # kernel_c has no HGMMA
    assert (loops["kernel_a"].instructions, loops["kernel_a"].hgmma, loops["kernel_a"].r2ur) == (4, 2, 0)
    # kernel_b: the shorter loop (0x10-0x50), not the enclosing one that starts at 0x0 (no such address: skipped)
    assert (loops["kernel_b"].instructions, loops["kernel_b"].hgmma, loops["kernel_b"].r2ur) == (5, 1, 2)
