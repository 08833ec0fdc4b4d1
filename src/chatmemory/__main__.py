"""`python -m chatmemory ...` runs the `chatmemory` command."""

from chatmemory._cli import main

if __name__ == "__main__":
    main()
