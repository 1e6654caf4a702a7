"""``python -m flux_chroma.cli``: the same as the ``flux-chroma`` command."""

from flux_chroma.cli.app import main

if __name__ == "__main__":
    main()
