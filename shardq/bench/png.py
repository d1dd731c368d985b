"""A dependency-free PNG bar chart (zlib + struct) with a 3x5 pixel font.

Enough to draw "ratio B/A per row, with the 1.0 line" for docs/BENCHMARKS.md without adding
matplotlib or Pillow to a server's dependencies.
"""

from __future__ import annotations

import struct
import zlib

# 3x5 glyphs, one string of 15 bits per glyph (rows top to bottom, 3 columns each).
_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001010010010", "8": "111101111101111",
    "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111",
    "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101",
    "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011",
    "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101",
    "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    ".": "000000000000010", ",": "000000000010100", "/": "001001010100100",
    "+": "000010111010000", "-": "000000111000000",
    ":": "000010000010000", "(": "010100100100010", ")": "010001001001010",
    "=": "000111000111000", " ": "000000000000000",
}  # fmt: skip

RGB = tuple[int, int, int]


class Canvas:
    """RGB pixels in a bytearray; rectangles and text; `png()` encodes."""

    def __init__(self, width: int, height: int, bg: RGB = (255, 255, 255)) -> None:
        self.w, self.h = width, height
        self.px = bytearray(bytes(bg) * (width * height))

    def rect(self, x: int, y: int, w: int, h: int, color: RGB) -> None:
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(self.w, x + w), min(self.h, y + h)
        if x1 <= x0 or y1 <= y0:
            return
        row = bytes(color) * (x1 - x0)
        for yy in range(y0, y1):
            off = (yy * self.w + x0) * 3
            self.px[off : off + len(row)] = row

    def text(self, x: int, y: int, s: str, color: RGB = (0, 0, 0), scale: int = 2) -> int:
        """Draw `s` (upper-cased); returns the x after the text."""
        for ch in s.upper():
            glyph = _FONT.get(ch) or _FONT[" "]
            for i, bit in enumerate(glyph):
                if bit == "1":
                    self.rect(x + (i % 3) * scale, y + (i // 3) * scale, scale, scale, color)
            x += 4 * scale
        return x

    def png(self) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.px[y * self.w * 3 : (y + 1) * self.w * 3]) for y in range(self.h)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        ihdr = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def ratio_chart(title: str, rows: list[tuple[str, float, bool]], goal: float = 1.0) -> bytes:
    """Horizontal bars of B/A per row, green when the row meets its goal, red otherwise;
    a vertical line marks `goal` (1.0 = as fast as A)."""
    label_w, bar_w, row_h, top = 330, 420, 26, 40
    width, height = label_w + bar_w + 70, top + row_h * len(rows) + 30
    # Capped so one very bad row (a latency ratio of 14) does not flatten the others.
    top_ratio = min(3.0, max([goal * 1.25] + [r for _, r, _ in rows]))
    cv = Canvas(width, height)
    cv.text(10, 10, title, (0, 0, 0), 2)
    for i, (label, r, good) in enumerate(rows):
        y = top + i * row_h
        cv.text(10, y + 6, label[:40], (40, 40, 40), 2)
        w = min(bar_w, int(bar_w * r / top_ratio))
        color = (46, 139, 87) if good else (205, 92, 92)
        cv.rect(label_w, y + 3, max(1, w), row_h - 8, color)
        cv.text(label_w + w + 6, y + 6, f"{r:.2f}", (0, 0, 0), 2)
    gx = label_w + int(bar_w * goal / top_ratio)
    cv.rect(gx, top - 4, 2, row_h * len(rows) + 4, (30, 30, 160))
    cv.text(gx - 12, height - 20, f"{goal:.1f}", (30, 30, 160), 2)
    return cv.png()
