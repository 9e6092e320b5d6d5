"""A bash-faithful reader of launch scripts, for the audit: it parses and interprets, never runs.

A script is tokenised and parsed the way bash does (quotes, ``\\``-newline continuations,
comments, ``;``/``&&``/``||``/``|``/``&``, redirections, here-documents, ``if``/``case``/
``for``/``while``/``until``/``select``, ``{ }`` and ``( )`` groups, function definitions, array
literals ``A=(...)`` with quotes, comments and blank lines inside), one complete command at a
time, and each command is interpreted on a model of the shell's state: variables, indexed and
associative arrays, exported names, functions, positional parameters, the working directory.
The result is every simple command the script would run, with its words after expansion and
quote removal (:class:`Command`). Nothing is ever executed: not a command, not a command
substitution, not a sourced file.

Bash semantics that are modelled: every parameter expansion form (``$V``, ``${V:-w}``,
``${V-w}``, ``${V:=w}``, ``${V=w}``, ``${V:+w}``, ``${V+w}``, ``${V:?w}``, ``${#V}``,
``${V#p}``/``##``/``%``/``%%``, ``${V/p/r}``/``//``/``/#``/``/%``, ``${V:o:l}``, ``${V^^}``/
``,,``, ``${!V}``), ``"${A[@]}"``/``${A[*]}``/``${#A[@]}``/``${A[i]}``/``${!A[@]}``, word
splitting of unquoted expansions, brace expansion, ``$((...))`` in 64-bit wrapping integers
(as bash computes it: ``$((9**9**9))`` is instant), ``export``/``declare``/``local``/
``readonly``/``typeset``/``unset``/``shift``/``set --``, ``VAR=x cmd`` (for that command only),
functions with their own positional parameters and ``local``, ``cd``/``pushd``/``popd``,
``source``/``.`` of a file found beside the script (read, never run), ``eval``, ``bash -c``,
``bash FILE``, ``bash <<EOF``, ``read -d '' V <<EOF``, ``cat > FILE <<EOF`` (the file is kept
for later reads), ``exit``/``return``/``break``/``continue``.

What is not knowable is marked, never guessed:

* the environment is not read (``env -i``): a variable the script never sets expands to
  empty, as in bash, and is listed in :attr:`Command.unresolved` (``--var NAME=VALUE`` sets it);
* command substitutions (``$(...)``, backticks) are not run: their value is unknown, kept as
  their literal text and listed in :attr:`Command.unknown` (pure idioms such as
  ``$(dirname "$0")``, ``$(cat <<EOF ...)`` and ``$(echo WORDS)`` are evaluated);
* script arguments (``$1``, ``$@``) are empty, as in a run without arguments (noted); a test
  on the value of one (``NODE_RANK=$1``, then ``[ "$NODE_RANK" = 0 ]``) is read both ways, like
  a test on a variable a cluster scheduler sets, with a note naming the argument;
* a template's placeholder after ``=`` (``VAR=<PATH>``, where bash sees redirections) is a value
  the reader does not know, noted at its line;
* an ``if``/``case``/``&&``/``||`` test decided only by literals and variables the script set
  takes its branch; otherwise every branch is read, each in its own copy of the state, and the
  commands that differ between branches carry :attr:`Command.branch`;
* ``for NAME in WORDS`` loops and decidable ``for ((...))`` loops are unrolled
  (:attr:`Command.loop`); ``while``/``until`` bodies are read once.

A comment inside a ``\\``-continued command ends that command, as in bash: the lines after it
are separate commands, recorded as :attr:`Command.dropped` when they look like arguments.

Every resource is bounded (:data:`LIMITS`): nesting depth, simple commands interpreted (loops
unrolled, functions called), branch combinations, string sizes, brace expansions, call depth.
A bound that is hit raises :class:`ShellLimitError` with a message that says which.

Modules: :mod:`.lexer` (tokens), :mod:`.parser` (syntax tree, :mod:`.nodes`),
:mod:`.interpreter` (walking the tree on :mod:`.state` worlds), :mod:`.builtins`,
:mod:`.expansions` (with :mod:`.brace`, :mod:`.patterns`, :mod:`.arith`, :mod:`.printf`),
:mod:`.conditions` (``test``, ``[[ ]]``), :mod:`.follow` (sourced and nested shell text),
:mod:`.script` (the entry point), :mod:`.model` (what is returned), :mod:`.vocabulary`.
"""

from kl_patches.audit.shell.arith import arith
from kl_patches.audit.shell.model import (
    LIMITS,
    Command,
    ShellLimitError,
    ShellParseError,
    ShellScript,
)
from kl_patches.audit.shell.script import parse_script
from kl_patches.audit.shell.vocabulary import scheduler_variable

__all__ = [
    "LIMITS",
    "Command",
    "ShellLimitError",
    "ShellParseError",
    "ShellScript",
    "arith",
    "parse_script",
    "scheduler_variable",
]
