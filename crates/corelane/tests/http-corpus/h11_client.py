"""Reads corelane's responses as Python's h11 does as a client, over one keep-alive connection:
for every request given (METHOD PATH [HEADER: VALUE]...; one per argument, fields split by
'|'), prints `STATUS BODY_LENGTH` or `reject REASON`. A response h11 cannot frame (a 304 or HEAD
with a body, a wrong Content-Length) throws the next one off, so every line after it is wrong
too. The independent reader tests/http_protocol.rs checks corelane's static-file answers with."""
import socket
import sys

import h11

host, port = sys.argv[1], int(sys.argv[2])
sock = socket.create_connection((host, port), timeout=10)
conn = h11.Connection(h11.CLIENT)
for spec in sys.argv[3:]:
    method, target, *fields = spec.split("|")
    headers = [("Host", host)] + [tuple(f.split(": ", 1)) for f in fields]
    sock.sendall(conn.send(h11.Request(method=method, target=target, headers=headers)))
    sock.sendall(conn.send(h11.EndOfMessage()))
    status, length = None, 0
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = sock.recv(65536)
                conn.receive_data(data)
                if not data:
                    print("reject closed")
                    sys.exit(0)
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                length += len(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
    except h11.RemoteProtocolError as e:
        print("reject", str(e).replace("\n", " "))
        sys.exit(0)
    print(status, length)
    conn.start_next_cycle()
