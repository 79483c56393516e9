"""One JPEG that shows all the judge's frames at a glance, for the dataset viewer and reviews."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from PIL import Image, ImageDraw, ImageFont

CAPTION_H = 30
PAD = 4
BACKGROUND = (24, 24, 24)
TEXT = (235, 235, 235)


def contact_sheet(frames: Sequence[tuple[float, str, Image.Image]], *, tile_width: int = 320) -> bytes:
    """A near-square grid of the frames in order, each captioned `<t_s>s <reason>`, as JPEG.

    Tiles keep each frame's aspect ratio (portrait videos get tall tiles). Raises ValueError
    when there is no frame: an empty sheet would only hide that the video did not decode.
    """
    if not frames:
        raise ValueError("no frames for a contact sheet")
    cols = math.ceil(math.sqrt(len(frames)))
    rows = math.ceil(len(frames) / cols)
    tiles = [img.convert("RGB").resize((tile_width, max(1, round(tile_width * img.height / img.width))),
                                       Image.Resampling.LANCZOS)
             for _, _, img in frames]
    tile_h = max(t.height for t in tiles)
    cell_w, cell_h = tile_width + PAD, tile_h + CAPTION_H + PAD
    sheet = Image.new("RGB", (cols * cell_w + PAD, rows * cell_h + PAD), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=CAPTION_H - 8)  # readable when the sheet is shown scaled down
    for i, ((t_s, reason, _), tile) in enumerate(zip(frames, tiles)):
        x, y = PAD + (i % cols) * cell_w, PAD + (i // cols) * cell_h
        sheet.paste(tile, (x, y))
        draw.text((x + 2, y + tile_h + 3), f"{t_s:.3f}s {reason}", fill=TEXT, font=font)
    out = io.BytesIO()
    sheet.save(out, format="JPEG", quality=85)
    return out.getvalue()
