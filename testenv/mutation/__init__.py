"""Mutation testing of gitsync's pure core (``make mutation``): how many one-keystroke
changes to a module its unit and property tests catch.

    python -m testenv.mutation                              # the pure core (see core())
    python -m testenv.mutation gitsync/engine/prune.py      # one module
    python -m testenv.mutation --list gitsync/engine/prune.py   # its mutants, not run

``mutants`` makes the mutants of a module (pure), ``run`` runs them in private copies of the
tree and writes the score report; the entry point and the table of which tests cover which
module are in ``__main__``. Survivors judged harmless are listed, each with its reason, in
``equivalent.txt`` beside this file.
"""
