"""Patching Thespian 4.0.1's TCP transport so that it signs every frame and reads with ``AuthFrameReader``.

Thespian pickles every message and ACK (``system/transport/TCPTransport.py``) and unpickles every
complete frame it reads (``ReceiveBuffer.completed`` in ``streamBuffer.py``); these are the points
replaced, in the driver before the actor system starts (fork-started children inherit them).
"""

from __future__ import annotations

import logging
from typing import Any

from actors._cluster.auth_codec import KIND_ACK
from actors._cluster.auth_reader import AuthFrameReader, Dropped, Installed, address_pair, peer_of
from actors._driver.errors import ConfigError

log = logging.getLogger("audition.auth")

# the Thespian 4.0.1 names replaced (checked to exist before any is)
PATCHED = ("TCPTransport.serializer", "TCPTransport._check_XMIT_4_done", "TCPTransport._processReceivedEnvelope",
           "TCPTransport._addedDataToIncoming", "TCPIncoming_Common.__init__", "ReceiveBuffer", "ackMsg",
           "ackDataErrMsg", "ackPacket", "toSendBuffer", "get_multiproc_context")


def patch_thespian(st: Installed) -> None:
    """Replace the pickling points of thespian.system.transport.TCPTransport (4.0.1 internals) and allow only fork."""
    from thespian.system import multiprocCommon as mc
    from thespian.system.transport import TCPTransport as tt
    from thespian.system.transport.streamBuffer import ackDataErrPacket

    for name in PATCHED:
        module: Any = mc if name == "get_multiproc_context" else tt
        owner = module
        for part in name.split("."):
            if not hasattr(owner, part):
                raise ConfigError(f"cannot enable authentication: {module.__name__}.{name} is missing "
                                  "(the patch targets Thespian 4.0.1's internals)")
            owner = getattr(owner, part)

    dumps = tt.serializer.dumps  # the module's pickle
    to_send = tt.toSendBuffer
    auth = st.auth
    for packet in (tt.ackPacket, ackDataErrPacket):
        st.ack_frames[auth.seal(dumps(packet), KIND_ACK)] = packet

    # Thespian's own class stays a base so isinstance checks on it hold; AuthFrameReader overrides all of it.
    reader = type("AuthReceiveBuffer", (AuthFrameReader, tt.ReceiveBuffer),
                  {"__module__": AuthFrameReader.__module__})

    def serializer(self: Any, intent: Any) -> bytes:
        recipient = address_pair(getattr(intent, "targetAddr", None))  # the (IP, port) it will dial
        # the module's pickler as it is now: audition's by-value fallback may be set after this patch (a key
        # enabled in code before fit()); captured here, a lambda in a config was declared poison and the run hung
        return bytes(to_send((self.myAddress, intent.message),
                             lambda obj: auth.seal(tt.serializer.dumps(obj), recipient=recipient)))

    incoming_init = tt.TCPIncoming_Common.__init__

    def incoming_init_with_peer(self: Any, rmtAddr: Any, baseSock: Any, rcvBuf: Any = None) -> None:
        incoming_init(self, rmtAddr, baseSock, rcvBuf)
        if rcvBuf is None and isinstance(self._rData, AuthFrameReader):
            self._rData.peer = peer_of(baseSock)

    check_ack = tt.TCPTransport._check_XMIT_4_done

    def check_ack_with_peer(self: Any, intent: Any, rcv: Any) -> Any:
        buf = getattr(intent, "ackbuf", None)
        if isinstance(buf, AuthFrameReader):
            buf.transport = self
            if buf.peer == AuthFrameReader.peer:
                buf.peer = f"{peer_of(getattr(intent, 'socket', None))} (reply to {intent.targetAddr})"
        return check_ack(self, intent, rcv)

    added_data = tt.TCPTransport._addedDataToIncoming

    def added_data_knowing_recipient(self: Any, inc: Any, *args: Any, **kwargs: Any) -> Any:
        buf = getattr(inc, "_rData", None)
        if isinstance(buf, AuthFrameReader):
            buf.transport = self
        return added_data(self, inc, *args, **kwargs)

    process_envelope = tt.TCPTransport._processReceivedEnvelope

    def process_unless_dropped(self: Any, envelope: Any, has_exclusive_flag: bool = False) -> Any:
        if isinstance(envelope.message, Dropped):
            return None
        return process_envelope(self, envelope, has_exclusive_flag=has_exclusive_flag)

    get_context = mc.get_multiproc_context

    def fork_only_context(capabilities: dict[str, Any]) -> Any:
        """Spawned/forkserver children re-import Thespian unpatched: they would accept any pickle."""
        ctx = get_context(capabilities)
        if ctx is None or ctx.get_start_method() != "fork":
            raise ConfigError("authenticated transport needs 'Process Startup Method': 'fork' (children started "
                              f"with {capabilities.get('Process Startup Method')!r} would not verify frames)")
        return ctx

    mc.get_multiproc_context = fork_only_context
    tt.ReceiveBuffer = reader
    tt.ackMsg, tt.ackDataErrMsg = (to_send(p, lambda obj: auth.seal(dumps(obj), KIND_ACK))
                                   for p in (tt.ackPacket, ackDataErrPacket))
    tt.TCPTransport.serializer = serializer
    tt.TCPTransport._check_XMIT_4_done = check_ack_with_peer
    tt.TCPTransport._addedDataToIncoming = added_data_knowing_recipient
    tt.TCPTransport._processReceivedEnvelope = process_unless_dropped
    tt.TCPIncoming_Common.__init__ = incoming_init_with_peer
    log.debug("Thespian TCP transport authentication enabled")


__all__ = ["PATCHED", "patch_thespian"]
