"""An independent openpi peer for the wire-format tests; runs in its own environment with openpi-client (numpy<2).

It never imports ladder_ros: everything it packs and unpacks goes through openpi-client's own
``msgpack_numpy`` module, and its client is openpi-client's ``WebsocketClientPolicy``. The server
mode follows openpi's ``websocket_policy_server.py`` protocol (metadata on connect, one reply per
request with server_timing, an error as a text frame then a close, /healthz) with behaviours the
tests choose. Binds 127.0.0.1 only.

    python openpi_peer.py samples                      # print hex msgpack of the shared samples, one per line
    python openpi_peer.py decode                       # read hex messages from stdin, print what they hold (JSON)
    python openpi_peer.py server --mode MODE [--dim 7 --chunk 5 --delay 0 --after 2]
    python openpi_peer.py client --port P [--steps 3]   # openpi's own client against a server
"""

import argparse
import asyncio
import http
import json
import sys
import time
import traceback

import numpy as np
from openpi_client import msgpack_numpy
from openpi_samples import describe, samples  # beside this script (numpy only, no ladder_ros)


def run_server(args):
    import websockets
    import websockets.asyncio.server as server_module
    import websockets.frames

    def respond(count):
        actions = np.full((args.chunk, args.dim), 0.01, dtype=np.float32)
        if args.mode == "nan":
            actions[1, 2] = np.nan
        if args.mode == "wrong_dim":
            actions = np.zeros((args.chunk, args.dim + 1), dtype=np.float32)
        if args.mode == "out_of_bounds":
            actions[0, 0] = 5.0
        return {"actions": actions, "received": count}

    async def handler(websocket):
        packer = msgpack_numpy.Packer()
        await websocket.send(packer.pack({"peer": "openpi-client", "numpy": np.__version__}))
        count = 0
        previous = None
        while True:
            try:
                observation = msgpack_numpy.unpackb(await websocket.recv())
            except websockets.ConnectionClosed:
                return
            start = time.monotonic()
            count += 1
            if args.mode == "disconnect" and count > args.after:
                await websocket.close()
                return
            if args.mode == "error" and count > args.after:
                try:
                    raise ValueError("observation/image has the wrong shape")
                except ValueError:
                    await websocket.send(traceback.format_exc())
                await websocket.close(code=websockets.frames.CloseCode.INTERNAL_ERROR, reason="Internal server error")
                return
            if args.delay > 0:
                await asyncio.sleep(args.delay)
            reply = respond(count)
            reply["echo"] = {k: describe(v) for k, v in observation.items() if k != "observation/image"}
            reply["server_timing"] = {"infer_ms": (time.monotonic() - start) * 1000}
            if previous is not None:
                reply["server_timing"]["prev_total_ms"] = previous * 1000
            await websocket.send(packer.pack(reply))
            previous = time.monotonic() - start

    def health(connection, request):
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        return None

    async def main():
        async with server_module.serve(handler, "127.0.0.1", args.port, compression=None, max_size=None,
                                       process_request=health) as server:
            print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
            await server.serve_forever()

    asyncio.run(main())


def run_client(args):
    from openpi_client import websocket_client_policy

    policy = websocket_client_policy.WebsocketClientPolicy("127.0.0.1", args.port)
    results = {"metadata": describe(policy.get_server_metadata()), "replies": []}
    for step in range(args.steps):
        observation = {"observation/image": np.zeros((8, 8, 3), dtype=np.uint8),
                       "observation/state": np.arange(7, dtype=np.float64) + step, "prompt": "pick up the spoon"}
        reply = policy.infer(observation)
        results["replies"].append(describe(reply))
    print(json.dumps(results), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("samples", "decode", "server", "client"))
    parser.add_argument("--mode", default="normal",
                        choices=("normal", "nan", "wrong_dim", "out_of_bounds", "disconnect", "error", "slow"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dim", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--after", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    if args.command == "samples":
        for sample in samples():
            print(msgpack_numpy.packb(sample).hex())
    elif args.command == "decode":
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(describe(msgpack_numpy.unpackb(bytes.fromhex(line.strip())))))
    elif args.command == "server":
        run_server(args)
    else:
        run_client(args)


if __name__ == "__main__":
    main()
