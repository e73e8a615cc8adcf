"""A small MCP server on the official Python SDK (`pip install mcp`): notes kept in a folder.

cairn starts it over stdio (see examples/mcp.toml):
    cairn --mcp 'notes=python3 examples/mcp/notes_server.py' tools
"""

import os
from pathlib import Path

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

NOTES = Path(os.environ.get("NOTES_DIR", "notes")).resolve()
mcp = Server("notes")


@mcp.tool()
def list_notes() -> list[str]:
    """The names of the notes."""
    return sorted(p.stem for p in NOTES.glob("*.txt"))


@mcp.tool()
def read_note(name: str) -> str:
    """The text of one note, by name (without .txt)."""
    path = NOTES / f"{name}.txt"
    if path.parent != NOTES or not path.is_file():
        raise ValueError(f"no note named {name!r}; the notes are: {', '.join(list_notes())}")
    return path.read_text()


@mcp.tool()
def count_words(name: str, min_length: int = 1) -> dict:
    """How many words of at least min_length letters a note has."""
    words = [w for w in read_note(name).split() if len(w.strip(".,;:!?")) >= min_length]
    return {"note": name, "words": len(words)}


if __name__ == "__main__":
    mcp.run()
