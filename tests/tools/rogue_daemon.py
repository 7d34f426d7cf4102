#!/usr/bin/env python3
"""Another user's fake gradtrace daemon, for tests of who the agent and the
CLI talk to. Listens on DIR/agent.sock and DIR/control.sock, counts every
byte clients send into GOT (rewritten after each read), answers each
control line with a forged status, and sends a capture-on control message
to each agent that connects.

  rogue_daemon.py DIR GOT [--drop-to UID]

--drop-to: bind as the caller, then become UID before listen(), so the
sockets' SO_PEERCRED names UID (the directory stays the caller's)."""
import os, select, socket, struct, sys

d, got = sys.argv[1], sys.argv[2]
out = open(got, "w")
socks = []
for name in ("agent.sock", "control.sock"):
    p = os.path.join(d, name)
    if os.path.exists(p):
        os.unlink(p)
    s = socket.socket(socket.AF_UNIX)
    s.bind(p)
    os.chmod(p, 0o666)
    socks.append(s)
if "--drop-to" in sys.argv:
    uid = int(sys.argv[sys.argv.index("--drop-to") + 1])
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
for s in socks:
    s.listen(16)
agent_srv, ctl_srv = socks
total = 0
conns = {}
while True:
    r, _, _ = select.select(socks + list(conns), [], [], 1.0)
    for s in r:
        if s in socks:
            c, _ = s.accept()
            conns[c] = s is ctl_srv
            if s is agent_srv:
                try:
                    c.sendall(struct.pack("<IHH", 0x4C544347, 2, 8))
                except OSError:
                    pass
            continue
        try:
            b = s.recv(65536)
        except OSError:
            b = b""
        if not b:
            conns.pop(s); s.close(); continue
        total += len(b)
        out.seek(0); out.truncate(); out.write(str(total)); out.flush()
        if conns.get(s):
            try:
                s.sendall(b'{"ok":true,"forged":true,"agents":[],"totals":{}}\n')
            except OSError:
                pass
