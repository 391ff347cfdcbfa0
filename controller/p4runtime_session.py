"""One P4Runtime session with one switch: readiness, arbitration, pipeline, write, read.

Use as a context manager:

    with SwitchSession("127.0.0.1:28001", device_id=1, log_path=...) as s:
        s.set_pipeline(P4Info.load(p4info_path), bmv2_json_path.read_bytes())
        s.write(request)

Entering waits until the switch answers P4Runtime (polling Capabilities until a
deadline, no blind sleeps) and becomes primary controller through the stream channel's
arbitration. Every request and response goes to the log file in protobuf text form.
Failures raise `P4RuntimeError` with a one-line message naming the switch.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

import grpc
from google.protobuf import text_format
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.p4info import P4Info

# A switch that is still starting refuses the first connections; gRPC then waits longer
# and longer before it tries again (1 s, 1.6 s, 2.6 s, 4.1 s, 6.6 s ...), so a switch
# ready after 5 s could be seen only after 16 s. Retrying every 0.1-0.5 s keeps the
# readiness poll as quick as the switch.
RECONNECT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                     ("grpc.min_reconnect_backoff_ms", 100),
                     ("grpc.max_reconnect_backoff_ms", 500)]


class P4RuntimeError(RuntimeError):
    """The switch did not answer, refused a request, or we are not primary."""


class SwitchSession:
    def __init__(self, address: str, device_id: int, election_id: int = 1,
                 log_path: str | Path | None = None, timeout_s: float = 30.0):
        self.address, self.device_id, self.election_id = address, device_id, election_id
        self.timeout_s = timeout_s
        self.log = open(log_path, "a") if log_path else None
        self.channel: grpc.Channel | None = None
        self.stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue = queue.Queue()
        self._responses: queue.Queue = queue.Queue()
        self._stream_thread: threading.Thread | None = None
        self.write_batches = 0
        self.updates_written = 0

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> SwitchSession:
        self.channel = grpc.insecure_channel(self.address, options=RECONNECT_OPTIONS)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        try:
            self._wait_ready()
            self._become_primary()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._requests.put(None)  # ends the stream's request iterator
        if self._stream_thread:
            self._stream_thread.join(timeout=2)
        if self.channel:
            self.channel.close()
        if self.log:
            self.log.close()
            self.log = None

    def _record(self, what: str, message) -> None:
        if self.log:
            self.log.write(f"# {time.strftime('%H:%M:%S')} {what}\n"
                           f"{text_format.MessageToString(message)}\n")
            self.log.flush()

    def _wait_ready(self) -> None:
        """Poll Capabilities until the switch's P4Runtime server answers."""
        deadline = time.monotonic() + self.timeout_s
        request = p4runtime_pb2.CapabilitiesRequest()
        while True:
            try:
                reply = self.stub.Capabilities(request, timeout=1.0)
                self._record("CapabilitiesResponse", reply)
                return
            except grpc.RpcError as err:
                if time.monotonic() >= deadline:
                    raise P4RuntimeError(
                        f"switch {self.address} (device {self.device_id}) did not answer "
                        f"P4Runtime within {self.timeout_s:g}s ({err.code().name})") from None
                time.sleep(0.05)  # poll interval, bounded by the deadline above

    def _become_primary(self) -> None:
        def requests():
            while True:
                item = self._requests.get()
                if item is None:
                    return
                yield item

        def pump(stream):
            try:
                for response in stream:
                    self._responses.put(response)
            except grpc.RpcError as err:
                self._responses.put(err)

        stream = self.stub.StreamChannel(requests())
        self._stream_thread = threading.Thread(target=pump, args=(stream,), daemon=True)
        self._stream_thread.start()
        update = p4runtime_pb2.StreamMessageRequest()
        update.arbitration.device_id = self.device_id
        update.arbitration.election_id.low = self.election_id
        self._record("StreamMessageRequest", update)
        self._requests.put(update)
        try:
            response = self._responses.get(timeout=self.timeout_s)
        except queue.Empty:
            raise P4RuntimeError(f"switch {self.address}: no arbitration answer "
                                 f"within {self.timeout_s:g}s") from None
        if isinstance(response, grpc.RpcError):
            raise P4RuntimeError(f"switch {self.address}: stream failed: "
                                 f"{response.code().name}") from None
        self._record("StreamMessageResponse", response)
        if response.arbitration.status.code != grpc.StatusCode.OK.value[0]:
            raise P4RuntimeError(f"switch {self.address}: not primary controller "
                                 f"({response.arbitration.status.message or 'refused'})")

    # ---------------------------------------------------------------- requests
    def _call(self, name: str, request, what: str):
        self._record(type(request).__name__, request)
        try:
            reply = getattr(self.stub, name)(request, timeout=self.timeout_s)
        except grpc.RpcError as err:
            raise P4RuntimeError(f"switch {self.address}: {what} failed: {err.code().name} "
                                 f"{err.details()}") from None
        return reply

    def set_pipeline(self, p4info: P4Info, device_config: bytes) -> None:
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        request.election_id.low = self.election_id
        request.config.p4info.CopyFrom(p4info.info)
        request.config.p4_device_config = device_config
        self._call("SetForwardingPipelineConfig", request, "pushing the pipeline")

    def write(self, request: p4runtime_pb2.WriteRequest) -> None:
        self._call("Write", request, f"writing {len(request.updates)} updates")
        self.write_batches += 1
        self.updates_written += len(request.updates)

    def read(self, entities: list[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        request.entities.extend(entities)
        self._record("ReadRequest", request)
        try:
            found = []
            for response in self.stub.Read(request, timeout=self.timeout_s):
                self._record("ReadResponse", response)
                found.extend(response.entities)
            return found
        except grpc.RpcError as err:
            raise P4RuntimeError(f"switch {self.address}: read failed: {err.code().name} "
                                 f"{err.details()}") from None

    def read_table_entries(self) -> list[p4runtime_pb2.TableEntry]:
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = 0  # every table
        return [e.table_entry for e in self.read([entity])]

    def read_counter(self, counter_id: int) -> dict[int, int]:
        """Packet counts of an indexed counter, by index."""
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = counter_id
        return {e.counter_entry.index.index: e.counter_entry.data.packet_count
                for e in self.read([entity])}
