"""Hand-written natural questions about installed packages' READMEs, with their evidence.

The second labelled corpus of issue 24: the long descriptions of the Python packages in
flux-chroma's environment (``export_package_readmes.py``; not committed, each README keeps its
own licence). Each question was written by reading the README that answers it, in a user's
words rather than the README's; ``evidence`` is a passage copied from it. The relevant
documents are every README that contains the evidence, and ``expect`` must be among them:

    python examples/eval/export_package_readmes.py /tmp/package-readmes
    python examples/eval/readme_questions.py /tmp/package-readmes readmes examples/eval/readmes-natural.jsonl
    flux-chroma ingest /tmp/package-readmes -c readmes --source-id readmes
    flux-chroma eval examples/eval/readmes-natural.jsonl -c readmes
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# (question, README that answers it, evidence copied from that README)
QUESTIONS: list[tuple[str, str, str]] = [
    ("Which library gives me both an async HTTP client and an async web server?", "aiohttp", "Async http client/server framework"),
    ("I want async code that runs on asyncio or on trio without changes", "anyio", "AnyIO is an asynchronous networking and concurrency library"),
    ("how should I store user passwords safely?", "bcrypt", "Acceptable password hashing for your software and your servers"),
    ("cache the results of an expensive function with least-recently-used eviction", "cachetools", "This module provides various memoizing collections and decorators"),
    ("Which package offers ready-made encryption primitives and recipes for Python?", "cryptography", "provides cryptographic recipes and"),
    ("How can I serialize lambdas and other objects that normal pickling refuses?", "dill", "extends Python's ``pickle`` module for serializing and de-serializing"),
    ("resolve domain name records such as MX or TXT from Python code", "dnspython", "is a DNS toolkit for Python"),
    ("one interface for local files, S3 and other remote storage", "fsspec", "A specification for pythonic filesystems."),
    ("a small pure-Python implementation of the HTTP/1.1 protocol, with no I/O", "h11", "This is a little HTTP/1.1 library written from scratch in Python"),
    ("domain names with non-ASCII characters, better than the standard library's encoder", "idna", "supersedes the standard library's `encodings.idna`"),
    ("How do I check that a JSON document has the structure I expect?", "jsonschema", "is an implementation of the `JSON Schema <https://json-schema.org>`_ specification for Python"),
    ("the basic package for arrays and numerical computing", "numpy", "NumPy is the fundamental package for scientific computing with Python."),
    ("How do I compare version strings and check version specifiers correctly?", "packaging", "version handling, specifiers"),
    ("where should my application keep its config and cache folders on each operating system?", "platformdirs", "package for determining platform-specific directories"),
    ("How can I let third parties extend my program with plugins and hooks?", "pluggy", "A minimalist production ready plugin system"),
    ("compute the date one month from now, or the next Tuesday", "python_dateutil", "Computing of relative deltas (next month, next year"),
    ("the easiest way to send HTTP requests from a script", "requests", "is a simple, yet elegant, HTTP library."),
    ("map Python classes to database tables", "sqlalchemy", "The Python SQL Toolkit and Object Relational Mapper"),
    ("read a TOML configuration file", "tomli", "A lil' TOML parser"),
    ("Build a command line app where the options come from the function's annotations", "typer", "Based on Python type hints."),
    ("a production server to run an ASGI application", "uvicorn", "An ASGI web server, for Python."),
    ("Restart my program automatically when a source file changes", "watchfiles", "file watching and code reload in python"),
    ("How do I write a server that keeps a two-way socket open with the browser?", "websockets", "is a library for building WebSocket_ servers and clients in Python"),
    ("Find out whether my script was started from bash, zsh or PowerShell", "shellingham", "Tool to Detect Surrounding Shell"),
    ("select HTML elements with CSS selectors in Beautiful Soup", "soupsieve", "Soup Sieve is a CSS selector library"),
    ("create and verify signed tokens for authentication (RFC 7519)", "pyjwt", "A Python implementation of `RFC 7519"),
    ("a fast non-cryptographic hash function for Python", "mmh3", "[MurmurHash (MurmurHash3)](https://en.wikipedia.org/wiki/MurmurHash)"),
    ("allow at most 10 requests per minute per user", "limits", "is a python library for rate limiting via multiple strategies"),
    ("train my own vocabulary for a language model's tokenizer", "tokenizers", "Train new vocabularies and tokenize"),
    ("Which library opens, edits and saves images in Python?", "pillow", "Python Imaging Library (Fork)"),
    ("escape user text before putting it into an HTML page", "markupsafe", "implements a text object that escapes characters so it is"),
    ("ignore files the same way git does, with .gitignore patterns", "pathspec", "Git's `gitignore`_ pattern matching"),
    ("write an Excel spreadsheet with formulas and formatting", "xlsxwriter", "is a Python module for writing files in the Excel 2007+ XLSX"),
    ("How do I write a decorator that preserves the wrapped function's signature, or monkey patch a module?", "wrapt", "A Python module for decorators, wrappers and monkey patching."),
    ("a library for building command line interfaces by composing commands", "click", "creating beautiful command line interfaces"),
    ("manage schema changes of my database over time", "alembic", "Alembic is a database migrations tool"),
    ("build a user interface that runs inside the terminal", "textual", "Run your apps in the terminal"),
    ("parse C source code in pure Python", "pycparser", "is a parser for the C language, written in pure Python."),
    ("get the text out of a PDF file", "pdfminer_six", "It is a tool for extracting information from PDF"),
    ("turn an HTML page into Markdown", "markdownify", "Convert some HTML to Markdown"),
    ("split a long text into pieces that fit a model's context window", "semantic_text_splitter", "split your text into chunks to fit within this context size"),
    ("push live events from a Starlette app to the browser", "sse_starlette", "Server-Sent Events for [Starlette]"),
]


def _normal(text: str) -> str:
    return " ".join(text.split())


def labelled(folder: Path, source_id: str) -> list[dict[str, object]]:
    """The labelled questions; relevant documents are the READMEs containing the evidence.

    Raises:
        SystemExit: An evidence passage is in no README, or not in its ``expect`` README.
    """
    docs = {f"{source_id}/{p.name}": _normal(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.md"))}
    out: list[dict[str, object]] = []
    for question, expect, evidence in QUESTIONS:
        relevant = [d for d, text in docs.items() if _normal(evidence) in text]
        if f"{source_id}/{expect}.md" not in relevant:
            sys.exit(f"evidence for {question!r} is not in README {expect!r}: {evidence!r}")
        out.append({"question": question, "relevant_documents": relevant, "kind": "natural"})
    return out


def main() -> None:
    """Entry point: ``readme_questions.py FOLDER SOURCE_ID OUT.jsonl``."""
    if len(sys.argv) != 4:
        sys.exit("usage: readme_questions.py FOLDER SOURCE_ID OUT.jsonl")
    items = labelled(Path(sys.argv[1]), sys.argv[2])
    Path(sys.argv[3]).write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    print(f"wrote {len(items)} natural questions to {sys.argv[3]}")


if __name__ == "__main__":
    main()
