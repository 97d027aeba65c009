"""How the commands that start a server (`imgpipe ui`, `imgpipe serve`) take their address:
checked, bound by imgpipe itself (a taken port is one error line, not the web server's exit), and
said aloud when other machines can reach it."""

from __future__ import annotations

import ipaddress
import socket

LOCAL_HOSTS = ("localhost",)


class ListenError(ValueError):
    """The address cannot be listened on; the message says why."""


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port). Raises ListenError."""
    if not 0 <= port <= 65535:
        raise ListenError(f"--port {port} is not a port (0 to 65535)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # TCP named, not left 0 as socket.create_server leaves it: the accepted connections inherit
    # it, and asyncio switches Nagle off only on sockets that say TCP; otherwise a response
    # written in two parts waits about 40 ms for the client's delayed acknowledgement.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen()
    except OSError as error:
        listener.close()
        raise ListenError(f"cannot listen on {host}:{port}: {error}") from error
    return listener


def reachability_warning(command: str, host: str, exposure: str) -> str | None:
    """The warning a server bound to host prints, None on loopback; exposure says what anyone
    who can reach it gets."""
    if is_loopback(host):
        return None
    return (
        f"imgpipe {command}: warning: listening on {host}, reachable from other machines; "
        f"{exposure}"
    )
