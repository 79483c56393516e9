"""What a publish check says, by episode: the review site links each item to its episode."""

from __future__ import annotations


def said_of(row: dict | None, text: str) -> dict:
    """What a publish check says of one episode, `{series, id, text}`, so the review site can link
    it; series and id None when what it says names no episode."""
    return {"series": row.get("series") if row else None, "id": row.get("id") if row else None, "text": text}
