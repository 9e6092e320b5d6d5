"""The builtins that change the shell's state, as bash runs them: assignments (scalars, arrays,
associative arrays, ``+=``), ``export``/``declare``/``local``/``readonly``/``typeset`` (namerefs
included), ``printf -v``, ``unset``, ``shift``, ``set --``, ``let``, ``cd``/``pushd``/``popd``,
``read``/``mapfile``/``readarray`` on a known input, ``exit``/``return``/``break``/
``continue``. Deviation: input the reader cannot see makes the variable unknown, never empty."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from kl_patches.audit.shell.follow import read_file, resolve, run_text, source, substitution
from kl_patches.audit.shell.lexer import ArrayLit
from kl_patches.audit.shell.model import LIMITS, ShellLimitError, short
from kl_patches.audit.shell.nodes import Simple
from kl_patches.audit.shell.printf import printf
from kl_patches.audit.shell.state import Field, Taint, World
from kl_patches.audit.shell.vocabulary import ASSIGN, NAME

if TYPE_CHECKING:
    from kl_patches.audit.shell.interpreter import Interpreter


def printf_v(
    interp: Interpreter, words: list[Field], node: Simple, w: World
) -> tuple[list[World], list[Any]]:
    """``printf -v VAR FORMAT ARGS...``: VAR gets the formatted text (unknown when a word
    is, or when the format has a conversion the reader does not model)."""
    rest = list(words[1:])
    flag = rest.pop(0).text
    if flag == "-v":
        if not rest:
            return [w], [2]
        target = rest.pop(0).text
    else:
        target = flag[2:]
    if rest and rest[0].text == "--":
        rest.pop(0)
    if not rest or not re.fullmatch(r"[A-Za-z_]\w*(\[[^\]]*\])?", target):
        return [w], [2]  # bash: usage error (or an invalid name), nothing is set
    taint = Taint()
    for f in rest:
        taint.add(f.taint)
    value = None if taint.unknown else printf(rest[0].text, [f.text for f in rest[1:]])
    if value is None:
        text = " ".join(f.text for f in words)
        label = f"printf -v {target} ... ({short(text)})"
        taint = Taint(unknown=[*taint.unknown, label] if taint.unknown else [label])
        value = text
    base, _, sub = target.partition("[")
    if sub:
        key = sub[:-1]
        if base in w.assoc:
            w.assoc[base][interp.expand_string(key, w)[0]] = value
        else:
            idx = interp.arith_value(key, w, node.line + w.line_offset)
            if idx is None:
                interp.note(f"line {node.line}: printf -v {target}: index not decidable")
                return [w], [0]
            w.arrays.setdefault(base, {})[idx] = value
        if taint.undecidable:
            w.taint[base] = taint
        return [w], [0]
    w.set(target, value, taint)
    return [w], [0]


def assign(interp: Interpreter, item: Any, w: World, line: int) -> Any:
    if isinstance(item, ArrayLit) and w.refs:
        item = ArrayLit(w.deref(item.name), item.append, item.elements, item.line)
    if isinstance(item, ArrayLit):
        values: list[str] = []
        taints: list[Taint] = []
        taint = Taint()
        assoc: dict[str, str] = {}
        for raw in item.elements:
            m = re.match(r"^\[([^\]]*)\]=(.*)$", raw, re.S)
            if m:
                key = interp.expand_string(m.group(1), w)[0]
                val, t = interp.expand_string(m.group(2), w)
                assoc[key] = val
                taint.add(t)
                continue
            for f in interp.expand(raw, w):
                values.append(f.text)
                taints.append(f.taint)
                taint.add(f.taint)
        if len(values) > LIMITS["array"]:
            raise ShellLimitError(f"line {line}: an array of more than {LIMITS['array']} words")
        if assoc and (item.name in w.assoc or not values):
            target = w.assoc.setdefault(item.name, {}) if item.append else {}
            target.update(assoc)
            w.assoc[item.name] = target
            w.vars.pop(item.name, None)
        else:
            old = w.arrays.get(item.name, {}) if item.append else {}
            if item.append and item.name in w.vars and item.name not in w.arrays:
                old = {0: w.vars[item.name]}
            start = max(old) + 1 if old else 0
            new = dict(old)
            for j, v in enumerate(values):
                new[start + j] = v
            w.arrays[item.name] = new
            w.vars.pop(item.name, None)
            if item.append:
                w.element_taint.pop(item.name, None)
            else:
                w.element_taint[item.name] = (tuple(values), tuple(taints))
        if taint.undecidable:
            w.taint[item.name] = taint
        return None
    m = ASSIGN.match(item)
    assert m is not None
    name, sub, op, raw = m.group(1), m.group(2), m.group(3), m.group(4)
    probes = len(w.assumed)
    value, taint = interp.expand_string(raw, w, assignment=True)
    if len(w.assumed) > probes and re.match(r"\$\{" + re.escape(name) + r":?[-=]", raw):
        # NAME=${NAME:-$(probe ...)}: the environment's NAME comes first
        w.assumed = (
            *w.assumed[:probes],
            *(
                f"{a} (set {name} with --var {name}=VALUE to read that run)"
                for a in w.assumed[probes:]
            ),
        )
    if w.refs.get(name) == "" and sub is None:  # declare -n REF; REF=TARGET
        w.refs[name] = value
        return None
    name = w.deref(name) if w.refs else name
    if sub is not None:
        key_raw = sub[1:-1]
        if name in w.assoc:
            key = interp.expand_string(key_raw, w)[0]
            prev = w.assoc[name].get(key, "") if op == "+=" else ""
            w.assoc[name][key] = prev + value
        else:
            idx = interp.arith_value(key_raw, w, line)
            if idx is None:
                interp.note(f"line {line}: array index [{key_raw}] not decidable; ignored")
                return None
            arr = w.arrays.setdefault(name, {})
            if name in w.vars:
                arr[0] = w.vars.pop(name)
            prev = arr.get(idx, "") if op == "+=" else ""
            arr[idx] = prev + value
        return None
    if op == "+=":
        old_taint = w.taint.get(name)
        if old_taint is not None:
            taint.add(old_taint)
        value = (w.get(name) or "") + value
    w.set(name, value, taint)
    return "ext" if taint.unknown else None


def declare(
    interp: Interpreter, name: str, rest: list[Any], w: World, line: int
) -> tuple[list[World], list[Any]]:
    flags = ""
    for item in rest:
        if isinstance(item, ArrayLit):
            if name == "local" and w.locals:
                save_local(interp, item.name, w)
            assign(interp, item, w, line)
            if name == "export" or "x" in flags:
                w.exported.add(item.name)
            continue
        fields = interp.expand(item, w, split=not ASSIGN.match(item))
        for f in fields:
            text = f.text
            if text.startswith(("-", "+")) and not ASSIGN.match(text):
                flags += text
                continue
            if "n" in flags.lstrip("+") and not flags.startswith("+"):
                nameref(interp, name, text, f.taint, w, line)
                break
            m = ASSIGN.match(item) if ASSIGN.match(item) else None
            target = m.group(1) if m else text
            if name == "local" and w.locals:
                save_local(interp, target, w)
            if m:
                assign(interp, item, w, line)
            elif "a" in flags and target not in w.arrays:
                w.arrays[target] = {}
            elif "A" in flags and target not in w.assoc:
                w.assoc[target] = {}
            elif name == "local" and not w.is_set(target):
                w.set(target, "")
            if name == "export" or "x" in flags:
                w.exported.add(target)
            if "f" in flags:
                pass
            break
    return [w], [0]


def nameref(interp: Interpreter, name: str, text: str, taint: Taint, w: World, line: int) -> None:
    """``declare -n REF=TARGET`` (``local -n``, ``typeset -n``): REF stands for TARGET."""
    ref, eq, target = text.partition("=")
    if not NAME.fullmatch(ref):
        return
    if name == "local" and w.locals and w.ref_frames:
        w.ref_frames[-1].setdefault(ref, w.refs.get(ref))
    if not eq:
        w.refs.pop(ref, None)  # a nameref without a target yet: REF=NAME later sets it
        w.refs[ref] = ""
        return
    if taint.unknown or not (NAME.fullmatch(target) or re.fullmatch(r"\w+\[[^\]]*\]", target)):
        interp.note(
            f"{interp.where(w, line)}: nameref {ref} -> {short(target)} cannot be followed; "
            f"${ref} is unknown"
        )
        w.refs.pop(ref, None)
        w.set(ref, text, Taint(unknown=[f"${ref} (a nameref to {short(target)})"]))
        return
    w.refs[ref] = target


def save_local(interp: Interpreter, name: str, w: World) -> None:
    frame = w.locals[-1]
    if name not in frame:
        frame[name] = (w.get(name) if w.is_set(name) else None, w.taint.get(name))


# ---------------------------------------------------------------- builtins
def run_builtin(
    interp: Interpreter,
    name: str,
    words: list[Field],
    prefix: dict[str, str],
    node: Simple,
    w: World,
) -> tuple[list[World], list[Any]] | None:
    args = [f.text for f in words[1:]]
    if name in ("true", ":"):
        return [w], [0]
    if name == "false":
        return [w], [1]
    if name in ("[", "test"):
        fields = words[1:]
        if name == "[":
            if not fields or fields[-1].text != "]":
                return [w], [1]
            fields = fields[:-1]
        return [w], [interp.test(fields, w)]
    if name == "exit":
        w.done = True
        return [w], [0]
    if name == "return":
        w.returning = True
        return [w], [0]
    if name in ("break", "continue"):
        n = int(args[0]) if args and args[0].isdigit() else 1
        if name == "break":
            w.breaking = n
        else:
            w.continuing = n
        return [w], [0]
    if name == "unset":
        for a in args:
            if a.startswith("-"):
                continue
            if "-f" in args:
                w.funcs.pop(a, None)
            elif "-n" in args:
                w.refs.pop(a, None)
            else:
                w.unset(a)
        return [w], [0]
    if name == "shift":
        n = int(args[0]) if args and args[0].isdigit() else 1
        w.pos = w.pos[n:]
        return [w], [0]
    if name == "set":
        if "--" in args:
            w.pos = args[args.index("--") + 1 :]
            w.pos_known = True
        return [w], [0]
    if name == "let":
        status: Any = 0
        for a in args:
            status = interp.arith_status(a, w, node.line)
        return [w], [status]
    if name in ("cd", "pushd", "popd"):
        return cd(interp, name, args, w)
    if name in ("source", "."):
        return source(interp, args, w, node)
    if name == "eval":
        text = " ".join(args)
        return run_text(interp, text, w, node.line + w.line_offset, None, keep_state=True)
    if name in ("read", "mapfile", "readarray"):
        return read(interp, name, words, node, w)
    if name in ("shopt", "alias", "unalias", "trap", "umask", "wait", "hash", "ulimit"):
        return [w], [0]
    return None


def cd(interp: Interpreter, name: str, args: list[str], w: World) -> tuple[list[World], list[Any]]:
    target = next((a for a in args if not a.startswith("-") or a == "-"), None)
    if name == "popd":
        w.cwd = w.dirstack.pop() if w.dirstack else None
        return [w], [0]
    if name == "pushd":
        w.dirstack.append(w.cwd)
    if target is None or target.startswith("~") or target == "-" or "$(" in target:
        w.cwd = None
        return [w], ["ext"]
    base = w.cwd or interp.script_dir
    if os.path.isabs(target):
        w.cwd = os.path.normpath(target)
    elif base is not None:
        w.cwd = os.path.normpath(os.path.join(base, target))
    else:
        w.cwd = None
    return [w], ["ext"]


READ_VALUED = frozenset(("-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u"))
"""``read`` options that take a value (``-a NAME`` names the array)."""

MAPFILE_VALUED = frozenset(("-d", "-n", "-O", "-s", "-u", "-C", "-c"))
"""``mapfile``/``readarray`` options that take a value (``-t`` takes none)."""


def input_of(interp: Interpreter, node: Simple, w: World) -> tuple[str | None, str]:
    """The text a builtin reads on its standard input, when the script says it: a
    here-document, a here-string, a process substitution of known output (``< <(echo
    ...)``), or a file beside the script (as it is now); else (None, what it reads)."""
    for r in node.redirs:
        if r.fd not in ("", "0"):
            continue
        if r.heredoc is not None:
            body = r.heredoc.body or ""
            return (body if r.heredoc.quoted else interp.expand_heredoc(body, w)), ""
        if r.op == "<<<":
            text, taint = interp.expand_string(r.target, w)
            return (
                (None, "a here-string of unknown value")
                if taint.unknown
                else (
                    text + "\n",
                    "",
                )
            )
        if r.op == "<" and r.target.startswith("<(") and r.target.endswith(")"):
            value, taint = substitution(interp, r.target[2:-1], w, r.target)
            if value is None or taint.unknown:
                return None, f"the output of {short(r.target)}, which is not run"
            return value + "\n" if value else "", ""
        if r.op == "<":
            target, taint = interp.expand_string(r.target, w)
            path = None if taint.unknown else resolve(interp, target, w)
            found = read_file(interp, path) if path else None
            if found is None:
                return None, f"the file {short(r.target)}, which the audit cannot read"
            return found, ""
    return None, "standard input"


def read(
    interp: Interpreter, name: str, words: list[Field], node: Simple, w: World
) -> tuple[list[World], list[Any]]:
    """``read`` and ``mapfile``/``readarray`` (its options as bash parses them): the
    variables get the lines of a known input; otherwise their value is unknown (never
    silently empty)."""
    args = [f.text for f in words[1:]]
    array = name in ("mapfile", "readarray")
    valued = MAPFILE_VALUED if array else READ_VALUED
    options: dict[str, str] = {}
    targets: list[str] = []
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            targets += args[k + 1 :]
            break
        if a.startswith("-") and len(a) > 1 and not targets:
            for j, c in enumerate(a[1:]):
                flag = "-" + c
                if flag in valued:
                    value = a[j + 2 :] or (args[k + 1] if k + 1 < len(args) else "")
                    if not a[j + 2 :]:
                        k += 1
                    options[flag] = value
                    break
                options[flag] = ""
            k += 1
            continue
        targets.append(a)
        k += 1
    if "-a" in options:
        targets = [options["-a"]]
    if not targets:
        targets = ["MAPFILE" if array else "REPLY"]
    targets = [w.deref(t) if w.refs else t for t in targets]
    body, what = input_of(interp, node, w)
    if body is None:
        label = f"`{short(' '.join([name, *args]))}` reading {what}"
        taint = Taint(unknown=[label])
        interp.note(
            f"{interp.where(w, node.line + w.line_offset)}: {label}: the value of "
            f"{', '.join('$' + t for t in targets)} is unknown to the audit"
        )
        for t in targets:
            if array or "-a" in options:
                w.arrays[t] = {0: f"${{{t}[@]}}"}
                w.vars.pop(t, None)
                w.taint[t] = taint
            else:
                w.set(t, f"${t}", taint)
        return [w], ["ext"]
    if array:
        delim = options.get("-d", "\n")[:1] or "\0"
        pieces = body.split(delim)
        lines = [p + delim for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
        if "-t" in options:
            lines = [x[:-1] if x.endswith(delim) else x for x in lines]
        skip = int(options["-s"]) if options.get("-s", "").isdigit() else 0
        count = int(options["-n"]) if options.get("-n", "").isdigit() else 0
        lines = lines[skip:]
        if count:
            lines = lines[:count]
        if len(lines) > LIMITS["array"]:
            raise ShellLimitError(
                f"line {node.line}: {name} reads more than {LIMITS['array']} lines"
            )
        origin = int(options["-O"]) if options.get("-O", "").isdigit() else 0
        old = w.arrays.get(targets[-1], {}) if "-O" in options else {}
        w.arrays[targets[-1]] = {**old, **{origin + i: x for i, x in enumerate(lines)}}
        w.vars.pop(targets[-1], None)
        w.taint.pop(targets[-1], None)
        return [w], [0]
    delim_all = "-d" in options
    text = body if delim_all else body.split("\n", 1)[0]
    text = text.strip("\n") if delim_all else text
    if "-r" not in options:
        text = text.replace("\\\n", "")
    if "-a" in options:
        w.arrays[targets[-1]] = dict(enumerate(text.split()))
        w.vars.pop(targets[-1], None)
        return [w], [0]
    parts = text.split(None, len(targets) - 1) if len(targets) > 1 else [text.strip()]
    for t, v in zip(targets, parts + [""] * len(targets), strict=False):
        w.set(t, v)
    return [w], [0]
