"""``python -m tierlog`` runs the ``tierlog`` command."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="tierlog")
