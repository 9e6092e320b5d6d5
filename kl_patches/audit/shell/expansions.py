"""Expansion of one raw word into fields: parameter expansion in every form bash has,
arrays, special parameters, arithmetic expansion, command substitution (through
:func:`.follow.substitution`, never run), word splitting of unquoted results and quote
removal, with each field's :class:`.state.Taint`. Deviation: script arguments and never-set
variables expand to empty, as in ``env -i bash script.sh``, and are recorded as such."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kl_patches.audit.shell.follow import substitution
from kl_patches.audit.shell.model import LIMITS, ShellLimitError
from kl_patches.audit.shell.patterns import replace, split_unescaped, trim
from kl_patches.audit.shell.state import Field, Taint, World
from kl_patches.audit.shell.vocabulary import (
    NAME,
    PLACEHOLDER,
    PLACEHOLDER_LABEL,
    UNKNOWN_SPECIAL,
)

if TYPE_CHECKING:
    from kl_patches.audit.shell.interpreter import Interpreter


_PLAIN = re.compile(r"[^'\"\\$`<]+")
_PLAIN_DQ = re.compile(r"[^\"\\$`]+")
_PLAIN_HEREDOC = re.compile(r"[^\\$`]+")


class Expander:
    """Expands one raw word into fields (see :meth:`Interpreter.expand`)."""

    def __init__(
        self,
        interp: Interpreter,
        w: World,
        raw: str,
        split: bool,
        in_arith: bool = False,
        assignment: bool = False,
        heredoc: bool = False,
    ) -> None:
        self.interp = interp
        self.w = w
        self.s = raw
        self.i = 0
        self.split = split
        self.in_arith = in_arith
        self.assignment = assignment
        self.heredoc = heredoc
        self.out: list[Field] = []
        self.cur: list[str] = []
        self.cur_taint = Taint()
        self.cur_quoted = False
        self.cur_open = False
        self.size = 0
        self.vanished: list[str] = []
        self.dropped = Taint()
        """Script arguments (``$1``) in words that expanded to nothing: an assignment
        ``V=$1`` keeps them on its (empty) value."""

    # ---------------------------------------------------------------- fields
    def _add(self, text: str, taint: Taint | None = None, quoted: bool = False) -> None:
        self.cur.append(text)
        self.cur_open = True
        if quoted:
            self.cur_quoted = True
        if taint is not None:
            self.cur_taint.add(taint)
        self.size += len(text)
        if self.size > LIMITS["string"]:
            raise ShellLimitError(f"a word grows beyond {LIMITS['string']} characters")

    def _break(self) -> None:
        text = "".join(self.cur)
        if text or self.cur_quoted:
            self.out.append(Field(text, self.cur_taint))
        elif self.cur_taint.unset:
            self.vanished.extend(u for u in self.cur_taint.unset if u not in self.vanished)
        if not (text or self.cur_quoted) and self.cur_taint.positional:
            self.dropped.add(Taint(args=True, positional=list(self.cur_taint.positional)))
        self.cur = []
        self.cur_taint = Taint()
        self.cur_quoted = False
        self.cur_open = False

    def _add_split(self, value: str, taint: Taint) -> None:
        if not self.split or taint.unknown:  # an unknown value stays one word
            self._add(value, taint)
            return
        if not value:
            self.cur_taint.add(taint)
            return
        pieces = re.split(r"[ \t\n]+", value)
        if pieces[0] == "":
            self._break()
            pieces = pieces[1:]
        for k, p in enumerate(pieces):
            if k:
                self._break()
            if p:
                self._add(p, taint)
            else:
                self.cur_taint.add(taint)

    def fields(self) -> list[Field]:
        self._scan(quoted=False)
        self._break()
        if not self.split and not self.out:
            return [Field("", self.dropped)]
        if not self.split and len(self.out) > 1:  # "${A[@]}" in a scalar context: joined
            taint = Taint()
            for f in self.out:
                taint.add(f.taint)
            return [Field(" ".join(f.text for f in self.out), taint)]
        return self.out

    # ---------------------------------------------------------------- scanning
    def _scan(self, quoted: bool) -> None:
        s = self.s
        plain = _PLAIN_HEREDOC if self.heredoc else _PLAIN_DQ if quoted else _PLAIN
        while self.i < len(s):
            m = plain.match(s, self.i)
            if m:
                self._add(m.group(0), quoted=quoted or self.heredoc)
                self.i = m.end()
                continue
            c = s[self.i]
            if self.heredoc:
                if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in "$`\\\n":
                    if s[self.i + 1] != "\n":
                        self._add(s[self.i + 1], quoted=True)
                    self.i += 2
                    continue
                if c == "$":
                    self._dollar(quoted=True)
                    continue
                if c == "`":
                    self._backtick(quoted=True)
                    continue
                self._add(c, quoted=True)
                self.i += 1
                continue
            if quoted:
                if c == '"':
                    self.i += 1
                    return
                if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                    if s[self.i + 1] != "\n":
                        self._add(s[self.i + 1], quoted=True)
                    self.i += 2
                    continue
                if c == "$":
                    self._dollar(quoted=True)
                    continue
                if c == "`":
                    self._backtick(quoted=True)
                    continue
                self._add(c, quoted=True)
                self.i += 1
                continue
            if c == "'":
                end = s.find("'", self.i + 1)
                end = len(s) if end < 0 else end
                self._add(s[self.i + 1 : end], quoted=True)
                self.i = end + 1
                continue
            if c == '"':
                self.i += 1
                self.cur_quoted = True
                self.cur_open = True
                self._scan(quoted=True)
                continue
            if c == "\\":
                if self.i + 1 < len(s):
                    self._add(s[self.i + 1], quoted=True)
                self.i += 2
                continue
            if c == "$":
                self._dollar(quoted=False)
                continue
            if c == "`":
                self._backtick(quoted=False)
                continue
            placeholder = PLACEHOLDER.match(s, self.i) if c == "<" else None
            if placeholder:  # only the lexer lets one in, after "=": VAR=<PLACEHOLDER>
                self._placeholder(placeholder.group(0))
                self.i = placeholder.end()
                continue
            self._add(c)
            self.i += 1

    def _placeholder(self, text: str) -> None:
        interp = self.interp
        where = interp.where(self.w, interp.at)
        interp.note(
            f"{where}: {text} is {PLACEHOLDER_LABEL} (bash reads '<' as a redirection and cannot "
            "run the line as written); read as a value the audit does not know"
        )
        self._add(text, Taint(unknown=[f"{text} ({PLACEHOLDER_LABEL}, {where})"]))

    def _backtick(self, quoted: bool) -> None:
        start = self.i
        j = self.i + 1
        while j < len(self.s) and self.s[j] != "`":
            j += 2 if self.s[j] == "\\" else 1
        self.i = min(j + 1, len(self.s))
        literal = self.s[start : self.i]
        inner = literal[1:-1].replace("\\`", "`").replace("\\$", "$").replace("\\\\", "\\")
        self._substitution(inner, literal, quoted)

    def _substitution(self, inner: str, literal: str, quoted: bool) -> None:
        value, taint = substitution(self.interp, inner, self.w, literal)
        if value is None:
            t = Taint(unknown=[literal])
            t.add(taint)
            self._add(literal, t, quoted)
            return
        if quoted:
            self._add(value, taint, True)
        else:
            self._add_split(value, taint)

    def _matching(self, open_: str, close: str, start: int) -> int:
        depth = 0
        j = start
        q = ""
        while j < len(self.s):
            c = self.s[j]
            if q:
                if c == "\\" and q == '"':
                    j += 2
                    continue
                if c == q:
                    q = ""
            elif c == "\\":
                j += 2
                continue
            elif c in "'\"" and not (c == "'" and open_ == "{"):
                q = c
            elif c == "'" and open_ == "{":
                end = self.s.find("'", j + 1)
                j = len(self.s) if end < 0 else end + 1
                continue
            elif c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return len(self.s) - 1

    def _dollar(self, quoted: bool) -> None:
        s = self.s
        start = self.i
        nxt = s[self.i + 1] if self.i + 1 < len(s) else ""
        if nxt == "(" and s.startswith("((", self.i + 1):
            end = self._matching("(", ")", self.i + 1)
            self.i = end + 1
            literal = s[start : self.i]
            inner = literal[3:-2]
            value = self.interp.arith_value(inner, self.w, 0, expansion=True)
            if value is None:
                self._add(literal, Taint(unknown=[literal]), quoted)
                return
            self._add(str(value), None, quoted)
            return
        if nxt == "(":
            end = self._matching("(", ")", self.i + 1)
            self.i = end + 1
            literal = s[start : self.i]
            self._substitution(literal[2:-1], literal, quoted)
            return
        if nxt == "{":
            end = self._matching("{", "}", self.i + 1)
            self.i = end + 1
            self._brace(s[start + 2 : end], s[start : self.i], quoted)
            return
        if nxt == "'" and not quoted:
            j = self.i + 2
            buf = []
            while j < len(s) and s[j] != "'":
                if s[j] == "\\" and j + 1 < len(s):
                    esc = s[j + 1]
                    buf.append({"n": "\n", "t": "\t", "'": "'", "\\": "\\", '"': '"'}.get(esc, esc))
                    j += 2
                    continue
                buf.append(s[j])
                j += 1
            self.i = j + 1
            self._add("".join(buf), quoted=True)
            return
        if nxt == '"' and not quoted:  # $"..." locale translation: a double-quoted string
            self.i += 1
            return
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-0"):
            self.i += 2
            self._special(nxt, quoted, s[start : self.i])
            return
        m = NAME.match(s, self.i + 1)
        if not m:
            self._add("$", quoted=quoted)
            self.i += 1
            return
        name = m.group(0)
        self.i = m.end()
        text, taint = self._lookup(name)
        if quoted:
            self._add(text, taint, True)
        else:
            self._add_split(text, taint)

    def _lookup(self, name: str) -> tuple[str, Taint]:
        w = self.w
        name = w.deref(name) if w.refs else name
        if w.is_set(name):
            return w.get(name) or "", w.taint.get(name, Taint())
        if name == "PWD":  # bash sets it to the directory the script is started from
            if w.cwd is not None:
                return w.cwd, Taint()
            return "$PWD", Taint(unknown=["$PWD"])
        if name == "BASH_SOURCE" and self.interp.script_path:
            return self.interp.script_path, Taint()
        if name in UNKNOWN_SPECIAL:
            return f"${name}", Taint(unknown=[f"${name}"])
        return "", Taint(unset=[name])

    def _special(self, c: str, quoted: bool, literal: str) -> None:
        w = self.w
        if c == "0":
            if self.interp.script_path:
                self._add(self.interp.script_path, None, quoted)
            else:
                self._add("$0", Taint(unknown=["$0"]), quoted)
            return
        if c.isdigit():
            k = int(c)
            if k <= len(w.pos):
                self._emit_value(w.pos[k - 1], Taint(), quoted)
            else:
                t = Taint(args=not w.pos_known, positional=[] if w.pos_known else [f"${c}"])
                self.cur_taint.add(t)
                if quoted:
                    self.cur_quoted = True
            return
        if c in "@*":
            self._positional_all(c, quoted)
            return
        if c == "#":
            self._add(str(len(w.pos)), Taint(args=not w.pos_known), quoted)
            return
        if c == "?":
            self._add("0", None, quoted)
            return
        if c == "-":
            self._add("hB", None, quoted)
            return
        self._add(literal, Taint(unknown=[literal]), quoted)

    def _positional_all(self, c: str, quoted: bool) -> None:
        w = self.w
        taint = Taint(args=not w.pos_known)
        self._list(list(w.pos), quoted, joined=(c == "*"), taint=taint)

    def _list(
        self,
        values: list[str],
        quoted: bool,
        joined: bool,
        taint: Taint,
        taints: tuple[Taint, ...] | None = None,
    ) -> None:
        """``"$@"``/``"${A[@]}"`` (a field per element), ``$*``/``${A[*]}`` (joined);
        ``taints``: each element's own taint (an array assigned from a literal), else
        ``taint`` for every field."""
        if joined:
            text = " ".join(values)
            if quoted:
                self._add(text, taint, True)
            else:
                self._add_split(text, taint)
            return
        if not values:
            self.cur_taint.add(taint)
            if quoted and not self.cur:
                self.cur_quoted = self.cur_quoted and False
            return
        for k, v in enumerate(values):
            if k:
                self._break()
            own = taints[k] if taints is not None else taint
            if quoted:
                self._add(v, own, True)
            else:
                self._add_split(v, own)

    def _brace(self, inner: str, literal: str, quoted: bool) -> None:
        w = self.w
        interp = self.interp
        # ${#NAME}, ${#A[@]}
        m = re.fullmatch(r"#([A-Za-z_]\w*|[@*]|\d+)(\[([@*])\])?", inner)
        if m:
            name = w.deref(m.group(1)) if w.refs else m.group(1)
            if m.group(2):
                if name in w.assoc:
                    n = len(w.assoc[name])
                else:
                    n = len(w.arrays.get(name, {})) or (1 if name in w.vars else 0)
                self._add(str(n), None, quoted)
                return
            if name in "@*":
                self._add(str(len(w.pos)), Taint(args=not w.pos_known), quoted)
                return
            value, taint = self._value_of(name, None)
            self._add(str(len(value or "")), taint, quoted)
            return
        # ${!A[@]} keys, ${!NAME} indirection
        m = re.fullmatch(r"!([A-Za-z_]\w*)(\[([@*])\])?", inner)
        if m:
            if not m.group(2) and w.refs.get(m.group(1)):  # ${!REF}: the name it refers to
                self._emit_value(w.refs[m.group(1)], Taint(), quoted)
                return
            name = w.deref(m.group(1)) if w.refs else m.group(1)
            if m.group(2):
                keys = (
                    list(w.assoc[name])
                    if name in w.assoc
                    else [str(k) for k in sorted(w.arrays.get(name, {}))]
                )
                self._list(keys, quoted, joined=m.group(3) == "*", taint=Taint())
                return
            target, taint = self._value_of(name, None)
            if target and NAME.fullmatch(target):
                value, t2 = self._lookup(target)
                taint.add(t2)
                self._emit_value(value, taint, quoted)
                return
            self._emit_value("", taint, quoted)
            return
        m = re.match(r"([A-Za-z_]\w*|\d+|[@*#?$!-])(\[([^\]]*)\])?", inner)
        if not m:
            interp.note(f"parameter expansion {literal} is not supported; kept as text")
            self._add(literal, Taint(unknown=[literal]), quoted)
            return
        name, sub = m.group(1), m.group(3)
        name = w.deref(name) if w.refs else name
        rest = inner[m.end() :]
        # whole-array forms
        if sub in ("@", "*") and not rest:
            if name in w.assoc:
                values = list(w.assoc[name].values())
            elif name in w.arrays:
                values = [w.arrays[name][k] for k in sorted(w.arrays[name])]
            elif name in w.vars:
                values = [w.vars[name]]
            else:
                values = []
            taint = w.taint.get(name, Taint()) if w.is_set(name) else Taint(unset=[name])
            own = w.element_taint.get(name)
            if sub == "@" and own is not None and own[0] == tuple(values) and name in w.taint:
                self._list(values, quoted, joined=False, taint=taint, taints=own[1])
                return
            self._list(values, quoted, joined=sub == "*", taint=taint)
            return
        if name in "@*" and not rest:
            self._positional_all(name, quoted)
            return
        sliced = re.fullmatch(r":\s*([^:]*?)\s*(?::\s*(.*?)\s*)?", rest) if name in "@*" else None
        if sliced is not None and sub is None:  # "${@:2}", "${@:1:3}": a slice of the arguments
            off = interp.arith_value(sliced.group(1), w, 0) if sliced.group(1) else 0
            count = interp.arith_value(sliced.group(2), w, 0) if sliced.group(2) else None
            if off is None or (sliced.group(2) and count is None):
                self._add(literal, Taint(unknown=[literal]), quoted)
                return
            args = [interp.script_path or "", *w.pos]
            start = off if off >= 0 else max(0, len(args) + off)
            values = args[start:]
            if count is not None:
                values = values[:count] if count >= 0 else values[: max(0, len(values) + count)]
            self._list(values, quoted, joined=name == "*", taint=Taint(args=not w.pos_known))
            return
        value, taint, is_set = self._param(name, sub)
        if not rest:
            if name.isdigit() and value is None:
                self._special(name, quoted, literal) if len(name) == 1 else self.cur_taint.add(
                    Taint(args=not w.pos_known, positional=[] if w.pos_known else [literal])
                )
                return
            self._emit_value(value or "", taint, quoted)
            return
        op_m = re.match(r"(:?[-=+?])|(##|#|%%|%)|(//|/#|/%|/)|(\^\^|\^|,,|,)|(:)|(@[QEPAa])", rest)
        if not op_m:
            interp.note(f"parameter expansion {literal} is not supported; kept as text")
            self._add(literal, Taint(unknown=[literal]), quoted)
            return
        word = rest[op_m.end() :]
        if op_m.group(1):
            op = op_m.group(1)
            empty = not is_set or (op.startswith(":") and value == "")
            kind = op[-1]
            if kind in "-=":
                if empty:
                    text, t = interp.expand_string(word, w)
                    if kind == "=" and not name.isdigit():
                        w.set(name, text, t)
                    self._emit_value(text, t, quoted)
                    return
                self._emit_value(value or "", taint, quoted)
                return
            if kind == "+":
                if empty:
                    return
                text, t = interp.expand_string(word, w)
                self._emit_value(text, t, quoted)
                return
            if empty:
                interp.note(f"{literal}: the variable is unset, bash would stop here")
                t = Taint(unset=[name] if not name.isdigit() else [])
                t.args = name.isdigit() and not w.pos_known
                self._emit_value("", t, quoted)
                return
            self._emit_value(value or "", taint, quoted)
            return
        base = value or ""
        if op_m.group(2):
            pattern, t = interp.expand_string(word, w)
            taint.add(t)
            self._emit_value(trim(base, op_m.group(2), pattern), taint, quoted)
            return
        if op_m.group(3):
            op = op_m.group(3)
            pat_raw, _, rep_raw = split_unescaped(word, "/")
            pattern, t1 = interp.expand_string(pat_raw, w)
            replacement, t2 = interp.expand_string(rep_raw, w)
            taint.add(t1)
            taint.add(t2)
            self._emit_value(replace(base, op, pattern, replacement), taint, quoted)
            return
        if op_m.group(4):
            op = op_m.group(4)
            if op == "^^":
                out = base.upper()
            elif op == ",,":
                out = base.lower()
            elif op == "^":
                out = base[:1].upper() + base[1:]
            else:
                out = base[:1].lower() + base[1:]
            self._emit_value(out, taint, quoted)
            return
        if op_m.group(5):
            off_raw, _, len_raw = word.partition(":")
            off = interp.arith_value(off_raw, w, 0) if off_raw.strip() else 0
            ln = interp.arith_value(len_raw, w, 0) if len_raw.strip() else None
            if off is None or (len_raw.strip() and ln is None):
                self._add(literal, Taint(unknown=[literal]), quoted)
                return
            if off < 0:
                off = max(0, len(base) + off)
            piece = base[off:]
            if ln is not None:
                piece = piece[:ln] if ln >= 0 else piece[: max(0, len(piece) + ln)]
            self._emit_value(piece, taint, quoted)
            return
        self._emit_value(base, taint, quoted)

    def _emit_value(self, value: str, taint: Taint, quoted: bool) -> None:
        if quoted:
            self._add(value, taint, True)
        else:
            self._add_split(value, taint)

    def _param(self, name: str, sub: str | None) -> tuple[str | None, Taint, bool]:
        w = self.w
        if name.isdigit():
            k = int(name)
            if k == 0:
                return self.interp.script_path, Taint(), True
            if k <= len(w.pos):
                return w.pos[k - 1], Taint(), True
            return None, Taint(args=not w.pos_known), False
        if name in "#?$!-":
            if name == "#":
                return str(len(w.pos)), Taint(args=not w.pos_known), True
            if name == "?":
                return "0", Taint(), True
            return f"${name}", Taint(unknown=[f"${name}"]), True
        value, taint = self._value_of(name, sub)
        if value is not None:
            return value, taint, True
        if sub is None and not w.is_set(name):
            special, t = self._lookup(name)
            if not t.unset:
                return special, t, True
        return None, taint if taint.unknown else Taint(unset=[name]), False

    def _value_of(self, name: str, sub: str | None) -> tuple[str | None, Taint]:
        w = self.w
        name = w.deref(name) if w.refs else name
        taint = Taint()
        if name in w.taint:
            taint.add(w.taint[name])
        if sub is None:
            if not w.is_set(name):
                return None, Taint(unset=[name]) if name not in UNKNOWN_SPECIAL else taint
            return w.get(name), taint
        if name in w.assoc:
            key, t = self.interp.expand_string(sub, w)
            taint.add(t)
            return w.assoc[name].get(key), taint
        idx = self.interp.arith_value(sub, w, 0)
        if idx is None:
            return None, Taint(unknown=[f"${{{name}[{sub}]}}"])
        arr = w.arrays.get(name)
        if arr is None:
            if idx == 0 and name in w.vars:
                return w.vars[name], taint
            return None, Taint(unset=[name])
        if idx < 0 and arr:
            idx = max(arr) + 1 + idx
        return arr.get(idx), taint
