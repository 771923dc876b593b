"""gitsync as a kubectl plugin, and shell completion.

kubectl runs ``kubectl-gitsync`` (on ``PATH``) for ``kubectl gitsync ARGS``, passing ARGS
as they are: ``--kubeconfig``, ``--context`` and ``-n`` after the command reach gitsync's
own flags of those names. For ``kubectl gitsync <TAB>``, kubectl (1.26 and later) runs
``kubectl_complete-gitsync ARGS WORD`` and reads Cobra's completion protocol: one
candidate a line (``value<TAB>help``), then ``:DIRECTIVE``. ``gitsync completion SHELL``
prints click's completion script for bash, zsh or fish.
"""

from __future__ import annotations

from typing import Final

import click
from click.shell_completion import ShellComplete, get_completion_class

PLUGIN: Final = "kubectl gitsync"
#: Cobra's directives: let the shell complete file names; offer no file names
_FILES: Final = 0
_NO_FILES: Final = 4


def complete(root: click.Group, argv: list[str]) -> None:
    """For ``kubectl_complete-gitsync``: the candidates for the last word of ``argv``
    (the words after ``kubectl gitsync``), in Cobra's protocol."""
    words = list(argv)
    incomplete = words.pop() if words else ""
    completer = ShellComplete(root, {}, PLUGIN, "_KUBECTL_GITSYNC_COMPLETE")
    directive = _NO_FILES
    for item in completer.get_completions(words, incomplete):
        if item.type in ("file", "dir"):
            directive = _FILES  # a path: the shell completes it
            continue
        help_ = " ".join((item.help or "").split())
        click.echo(f"{item.value}\t{help_}" if help_ else item.value)
    click.echo(f":{directive}")


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash:  eval "$(gitsync completion bash)"     (in ~/.bashrc)
    zsh:   eval "$(gitsync completion zsh)"      (in ~/.zshrc)
    fish:  gitsync completion fish > ~/.config/fish/completions/gitsync.fish
    """
    cls = get_completion_class(shell)
    assert cls is not None  # the three click ships
    root = click.get_current_context().find_root().command
    click.echo(cls(root, {}, "gitsync", "_GITSYNC_COMPLETE").source())
