# aco_gdb.py - gdb commands for libaco programs.
#
# Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
#
#   (gdb) source tools/aco_gdb.py
#   (gdb) aco-bt EXPR            backtrace of the co EXPR (an aco_t*)
#
# A suspended co has no frames gdb can see: its registers are in co->reg
# (acosw.S's layout) and its stack is either still on its share stack (it is
# the stack's owner) or was copied to its save stack when another co took the
# share stack.  aco-bt shows its backtrace anyway:
#
#   running co      the ordinary backtrace of the selected thread;
#   ended co        a note: no frames;
#   suspended co    gdb's registers are set to the co's saved ones for the
#                   time of one "backtrace"; an evicted co's frames are copied
#                   back to their place on the share stack for that time
#                   (what they overwrite is saved first).  Afterwards the
#                   registers, that memory and the selected frame are exactly
#                   as they were.
#
# It needs a live process (gdb writes registers and memory; qemu-user's gdb
# stub will do), and a co of the selected thread (a co's saved registers mean
# nothing to another one).  x86-64, i386, aarch64, riscv64.
# Frame #0 is the yield itself (aco_yield, or the resume of a main co), shown
# at the call, as gdb shows every caller frame; a co that never ran shows its
# function's entry.

import gdb

# aco_t.reg slots come from the program itself: aco.c defines
# `enum aco__slot` from acosw.S's layout table, and its debug information
# names each slot: aco__slot_pc, aco__slot_sp, and one per callee-saved
# integer register, named as gdb names it (aco__slot_rbx, aco__slot_x19,
# aco__slot_s0, ...; aco__slot_lr is an alias of x30 / ra).  FP registers do
# not matter to a backtrace and are not listed.
_PREFIX = "aco__slot_"


def _layout():
    """{"regs": ((gdb register, slot), ...), "pc": slot, "sp": slot}, read
    from the program's debug information."""
    try:
        fields = gdb.lookup_type("enum aco__slot").fields()
    except gdb.error:
        raise gdb.GdbError("aco-bt: no 'enum aco__slot' in the debug information: "
                           "build aco.c with -g")
    slots = dict((f.name[len(_PREFIX):], int(f.enumval)) for f in fields
                 if f.name.startswith(_PREFIX))
    if "pc" not in slots or "sp" not in slots:
        raise gdb.GdbError("aco-bt: enum aco__slot lacks the pc or sp slot")
    regs = tuple(sorted(((name, i) for name, i in slots.items()
                         if name not in ("pc", "sp", "lr")), key=lambda r: r[1]))
    return {"regs": regs, "pc": slots["pc"], "sp": slots["sp"]}


def _arch():
    name = gdb.selected_inferior().architecture().name()
    if name == "i386:x86-64":
        return "x86_64"
    if name in ("i386", "i386:intel"):
        return "i386"
    if name.startswith("aarch64"):
        return "aarch64"
    if name == "riscv:rv64":
        return "riscv64"
    raise gdb.GdbError("aco-bt: unsupported architecture %s" % name)


def _u(value):
    """A gdb.Value (pointer or integer) as an unsigned Python int."""
    return int(value.cast(gdb.lookup_type("unsigned long"))) & \
        ((1 << (8 * gdb.lookup_type("unsigned long").sizeof)) - 1)


def _current_co():
    """aco_gtls_co of the selected thread, or None if gdb cannot read it
    (thread-local storage needs libthread_db: not with a static program
    under qemu's gdb stub)."""
    try:
        return _u(gdb.parse_and_eval("aco_gtls_co"))
    except gdb.error:
        return None


def _is_running(co, addr, is_main):
    """Is co the selected thread's running co?"""
    cur = _current_co()
    if cur is not None:
        return cur == addr
    # Without aco_gtls_co: a main co runs iff the thread's frames are not a
    # co's (those end in aco_protector); a non-main co runs iff it owns its
    # share stack and the thread's stack pointer is on that stack.
    if is_main:
        frame, depth = gdb.newest_frame(), 0
        while frame is not None and depth < 100000:
            if frame.name() == "aco_protector":
                return False
            frame, depth = frame.older(), depth + 1
        return True
    sp = _u(gdb.newest_frame().read_register("sp"))
    sstk = co["share_stack"].dereference()
    lo = _u(sstk["ptr"])
    return (_u(sstk["owner"]) == addr and lo <= sp < lo + int(sstk["sz"]))


def _checked_mode():
    """libaco's checked mode is on in the inferior (aco_checked.c's
    checked_on is 1; a libaco without the mode, or without debug
    information: no)."""
    try:
        return int(gdb.parse_and_eval("checked_on")) != 0
    except gdb.error:
        return False


class _Swap(object):
    """Registers (and optionally share-stack bytes) set for a while and put
    back exactly, with the selected frame."""

    def __init__(self, lay):
        self.inferior = gdb.selected_inferior()
        self.level = gdb.selected_frame().level()
        gdb.newest_frame().select()
        frame = gdb.selected_frame()
        self.names = [name for name, _ in lay["regs"]] + ["pc", "sp"]
        self.saved_regs = [(n, _u(frame.read_register(n))) for n in self.names]
        self.saved_mem = None

    def set_regs(self, values):
        for name, v in values:
            gdb.execute("set $%s = %d" % (name, v), to_string=True)

    def put_bytes(self, addr, data):
        self.saved_mem = (addr, bytes(self.inferior.read_memory(addr, len(data))))
        self.inferior.write_memory(addr, data)

    def restore(self):
        if self.saved_mem is not None:
            self.inferior.write_memory(self.saved_mem[0], self.saved_mem[1])
        self.set_regs(self.saved_regs)
        frame = gdb.newest_frame()
        for _ in range(self.level):
            older = frame.older()
            if older is None:
                break
            frame = older
        frame.select()


class AcoBt(gdb.Command):
    """Backtrace of a libaco co: aco-bt EXPR, EXPR an aco_t*.

A suspended co's saved registers are loaded for one backtrace; an evicted
co's frames are copied back from its save stack for that time.  Registers,
memory and the selected frame are restored afterwards."""

    def __init__(self):
        super(AcoBt, self).__init__("aco-bt", gdb.COMMAND_STACK,
                                    gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        if not arg.strip():
            raise gdb.GdbError("usage: aco-bt EXPR (an aco_t*)")
        if not gdb.selected_inferior().pid or not gdb.selected_thread():
            raise gdb.GdbError("aco-bt: the program is not running")
        co_type = gdb.lookup_type("aco_t").pointer()
        co = gdb.parse_and_eval(arg).cast(co_type)
        addr = _u(co)
        if addr == 0:
            raise gdb.GdbError("aco-bt: %s is NULL" % arg)
        _arch()     # supported?
        lay = _layout()
        reg = co.dereference()["reg"]
        slot = lambda i: _u(reg[i])
        is_main = _u(co["main_co"]) == 0
        what = "main co" if is_main else "co"

        if _is_running(co, addr, is_main):
            gdb.write("%s %#x is running: its frames are the thread's\n" % (what, addr))
            gdb.write(gdb.execute("backtrace", to_string=True))
            return
        if not is_main and int(co["is_end"]):
            gdb.write("co %#x has ended: it has no frames\n" % addr)
            return

        pc, sp = slot(lay["pc"]), slot(lay["sp"])
        evicted = None
        started = True
        if not is_main:
            sstk = co["share_stack"].dereference()
            top = _u(sstk["align_retptr"])
            started = sp != top
            checked = _checked_mode()
            if checked:
                # Each co runs in a window of its own (aco.h, "Checked
                # mode"): align_retptr is the last taker's.  A co that has
                # not run still has its first pc, its function.
                started = pc != _u(co["fp"])
            if started and _u(sstk["owner"]) != addr:
                n = int(co["save_stack"]["valid_sz"])
                buf = _u(co["save_stack"]["ptr"])
                if checked:
                    top = sp + n
                if n != top - sp:
                    raise gdb.GdbError("aco-bt: co %#x: %d saved bytes but sp %#x is %d "
                                       "below the top" % (addr, n, sp, top - sp))
                evicted = (sp, bytes(gdb.selected_inferior().read_memory(buf, n)))
            if checked and _arch() in ("x86_64", "i386") and (evicted or not started):
                # The slot above a co's frames holds the return into
                # aco_protector (acosw.S), where its backtrace ends: on the
                # share stack it stays there, but the window of a co that
                # is evicted or has not run yet may not hold it: put it
                # back for the backtrace.
                ret = _u(gdb.parse_and_eval("(unsigned long)&aco_protector_ret"))
                ret = ret.to_bytes(gdb.lookup_type("unsigned long").sizeof, "little")
                evicted = (sp, (evicted[1] if evicted else b"") + ret)
        # A suspended co's pc is a return address: show the call, as gdb does
        # for every caller frame (same CFI row, the right line).
        if started:
            pc -= 1

        state = "suspended" if evicted is None else "evicted to its save stack"
        if not started:
            state = "not started yet"
        gdb.write("%s %#x (%s), pc %#x, sp %#x:\n" % (what, addr, state,
                                                       slot(lay["pc"]), sp))
        swap = _Swap(lay)
        try:
            if evicted is not None:
                swap.put_bytes(evicted[0], evicted[1])
            values = [(name, slot(i)) for name, i in lay["regs"]]
            swap.set_regs(values + [("sp", sp), ("pc", pc)])
            out = gdb.execute("backtrace", to_string=True)
        finally:
            swap.restore()
        gdb.write(out)


AcoBt()
