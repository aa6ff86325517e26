"""The sandbox's system-call filter (seccomp): what student code may not ask the kernel at all.

A sandbox runs as an unprivileged uid with no capabilities, but the kernel lets any process create
a user namespace and be root inside it: mount, netfilter, keyrings and the rest of what a namespace's
root may do become reachable, and with them most of the kernel bugs that an unprivileged process can
exploit. The filter refuses those calls before the kernel looks at them, in every sandbox and in
everything a sandbox forks, wherever the worker runs (natively, in the grader's container, on
Kubernetes: a filter stacks on whatever the container runtime installed).

A classic BPF program, written out here (no library needed on the machine), installed by the sandbox
itself after it dropped root and set ``no_new_privs`` (``install``). Everything is allowed except:

* a system call of another ABI than the machine's own (i386 through ``int 0x80``, x32): the rules
  below are written in the native numbers, which another ABI's numbers would slip past;
* the calls of ``DENIED``;
* ``clone`` with a ``CLONE_NEW*`` flag (threads and fork use ``clone`` without them);
* ``clone3``, whose flags live in memory a filter cannot read: it answers ENOSYS, the answer of a
  kernel without ``clone3``, so the C library falls back to ``clone``, checked above;
* sockets of any family but Unix, IPv4, IPv6 and netlink: the others are rarely used protocols the
  kernel loads on demand, or reach past the sandbox's network namespace (vsock, a virtual machine's
  line to its host, belongs to no network namespace);
* netlink sockets other than ``NETLINK_ROUTE``: the C library reads the network's addresses through
  it (``getaddrinfo``, ``if_nameindex``), which in the sandbox's own network namespace show a lone
  loopback; changing anything there needs ``CAP_NET_ADMIN``, which the sandbox cannot get.

A refused call fails with EPERM (ENOSYS for ``clone3``): student code gets an ``OSError`` it can
handle, and the sandbox lives on.
"""

from __future__ import annotations

import ctypes
import os
import struct

from .linux import check, libc

MACHINES = ("x86_64", "aarch64")
# The calls refused outright, as (the kernel's number on x86_64, on aarch64; None where it has no
# such call): arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h. Each
# group says why: reached only through a namespace's root, attack surface no notebook needs, or a
# way around the filter.
DENIED = {
    # new namespaces (clone's flags and clone3 are handled apart)
    "unshare": (272, 97), "setns": (308, 268),
    # filesystems: the sandbox's root is built before the filter and never changes after
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "open_tree_attr": (467, 467), "move_mount": (429, 429),
    "mount_setattr": (442, 442), "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "fspick": (433, 433),
    # kernel features with a long record of bugs, and no use in a notebook
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    # io_uring performs its requests (sockets, opens) without passing through this filter
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    # other processes' memory and descriptors (a sandbox's own children included)
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    # the machine's own business (all need capabilities too): modules, kexec, reboot, swap, accounting,
    # quotas, handles that bypass path checks, the kernel's log, x86's I/O ports and segment tables
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "reboot": (169, 142), "swapon": (167, 224),
    "swapoff": (168, 225), "acct": (163, 89), "quotactl": (179, 60), "quotactl_fd": (443, 443),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264), "lookup_dcookie": (212, 18),
    "syslog": (103, 116), "iopl": (172, None), "ioperm": (173, None), "modify_ldt": (154, None),
    "uselib": (134, None),
}
# The calls whose arguments the filter reads, and the one that installs it.
INSPECTED = {"clone": (56, 220), "clone3": (435, 435), "socket": (41, 198), "seccomp": (317, 277)}
NUMBERS = {machine: {name: numbers[index] for name, numbers in {**DENIED, **INSPECTED}.items()
                     if numbers[index] is not None}
           for index, machine in enumerate(MACHINES)}
# The AUDIT_ARCH_* value the kernel reports for the machine's own ABI (include/uapi/linux/audit.h).
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000  # x32's calls come with x86_64's AUDIT_ARCH and this bit in the number

CLONE_NEW_FLAGS = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (NEWTIME: clone3 only)
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, NETLINK_ROUTE = 1, 2, 10, 16, 0
EPERM, ENOSYS = 1, 38

# Classic BPF over struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6]},
# little-endian on both architectures: the low half of args[i] is at 16 + 8 * i (clone's flags and
# socket's arguments are 32-bit values to the kernel).
LOAD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
NR, ARCH = 0, 4
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1, 1 << 2


def _arg(index: int) -> int:
    return 16 + 8 * index


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` (``os.uname().machine``) as (code, jt, jf, k) instructions."""
    numbers = NUMBERS[machine]
    # Instructions with symbolic jump targets, resolved below: (code, k, target if true, target if false).
    code: list[tuple] = [(LOAD, ARCH), (JEQ, AUDIT_ARCH[machine], None, "deny"), (LOAD, NR)]
    if machine == "x86_64":
        code.append((JGE, X32_SYSCALL_BIT, "deny", None))
    code += [(JEQ, numbers[name], "deny", None) for name in DENIED if name in numbers]
    code += [
        (JEQ, numbers["clone3"], "enosys", None),
        (JEQ, numbers["clone"], "clone", None),
        (JEQ, numbers["socket"], "socket", None),
        (RET, ALLOW),
        "clone", (LOAD, _arg(0)), (JSET, CLONE_NEW_FLAGS, "deny", "allow"),
        "socket", (LOAD, _arg(0)), (JEQ, AF_UNIX, "allow", None), (JEQ, AF_INET, "allow", None),
        (JEQ, AF_INET6, "allow", None), (JEQ, AF_NETLINK, None, "deny"),
        (LOAD, _arg(2)), (JEQ, NETLINK_ROUTE, "allow", "deny"),
        "allow", (RET, ALLOW),
        "deny", (RET, ERRNO | EPERM),
        "enosys", (RET, ERRNO | ENOSYS),
    ]
    labels, index = {}, 0
    for item in code:
        if isinstance(item, str):
            labels[item] = index
        else:
            index += 1
    instructions = []
    for item in code:
        if isinstance(item, str):
            continue
        op, k, *targets = item
        here = len(instructions) + 1  # jumps count from the next instruction
        jt, jf = (labels[t] - here if t else 0 for t in (targets or (None, None)))
        assert 0 <= jt < 256 and 0 <= jf < 256, "a jump longer than classic BPF's 255"
        instructions.append((op, jt, jf, k))
    return instructions


def unsupported(machine: str | None = None) -> str | None:
    """Why sandboxes cannot be confined on this machine (an architecture the filter does not know),
    else None: the worker refuses to start rather than hand out sandboxes without the filter."""
    machine = machine or os.uname().machine
    if machine in NUMBERS:
        return None
    return f"the sandbox's system-call filter knows {' and '.join(MACHINES)}, not this machine's {machine}"


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class Filter:
    """The machine's filter, assembled once (in the warm worker, before any fork); ``install``
    is then one ``seccomp`` call per sandbox."""

    def __init__(self, machine: str | None = None):
        machine = machine or os.uname().machine
        if unsupported(machine):
            raise OSError(unsupported(machine))
        instructions = program(machine)
        self.length = len(instructions)
        self.bytes = b"".join(struct.pack("<HBBI", *instruction) for instruction in instructions)
        self._install_call = NUMBERS[machine]["seccomp"]
        self._prog = _Program(self.length, self.bytes)

    def install(self) -> None:
        """Confine the calling process and everything it forks from now on, for good. Needs
        ``no_new_privs`` (or CAP_SYS_ADMIN), and a container's own filter must allow seccomp(2).

        SPEC_ALLOW: before Linux 5.16 the kernel by default also turned on its Spectre mitigations
        for speculative store bypass and indirect branches in every process with a filter, which
        slows all of its code; they guard a process's memory against code running beside it, and
        everything in a sandbox's memory is its student's own, who runs code in it anyway."""
        check(libc.syscall(ctypes.c_long(self._install_call), ctypes.c_ulong(SECCOMP_SET_MODE_FILTER),
                           ctypes.c_ulong(SECCOMP_FILTER_FLAG_SPEC_ALLOW), ctypes.byref(self._prog)),
              "install the system-call filter")
