"""`kafka-compat serve | cluster | configs | dump-log`: the command line.

`serve` with no arguments runs a single node with embedded defaults: data in
./kafka-compat-data, listening on 127.0.0.1:9092. A `server.properties` file
(Kafka's names) and `--override name=value` flags change that; flags win. With
`zookeeper.connect` set it runs one broker of a ZooKeeper cluster.

`cluster --brokers N` runs a development cluster on this machine: a ZooKeeper
(Debian's `zookeeper` package) and N brokers with ids 0..N-1 on free loopback
ports, each a `serve` child process, until Ctrl-C.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time

# No broker.id / node.id here: either one alone names the broker (the other follows it),
# and when both are unset BrokerConfig's default 0 names the single embedded node.
EMBEDDED_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "./kafka-compat-data",
}


def build_config(properties: str | None, overrides: list[str]):
    """Embedded defaults, under the properties file, under the command-line flags."""
    from .properties import load_properties
    from .server.kafka_config import BrokerConfig
    values = dict(EMBEDDED_DEFAULTS)
    if properties:
        values.update(load_properties(properties))
    for item in overrides:
        if "=" not in item:
            raise SystemExit(f"--override expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        values[k.strip()] = v.strip()
    return BrokerConfig.from_properties(values)


async def serve(config) -> int:
    from .server.broker import Broker, BrokerStartError
    broker = Broker(config, retain_freed_buffers=True)
    try:
        await broker.start()
    except BrokerStartError as e:
        print(f"kafka-compat: {e}", file=sys.stderr)
        return 1
    host, port = broker.advertised_endpoint()
    print(f"kafka-compat serving on {host}:{port} (data in {', '.join(broker.log_dirs)})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("kafka-compat shutting down", flush=True)
    await broker.stop()
    return 0


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def _property(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise SystemExit(f"--override expects name=value, got {item!r}")
    k, v = item.split("=", 1)
    return k.strip(), v.strip()


def run_cluster(brokers: int, overrides: list[str], data_dir: str | None, broker_overrides: list[str] = ()) -> int:
    """Start ZooKeeper and the brokers, print how to reach them, and stop everything on Ctrl-C or SIGTERM.
    ``broker_overrides``: ``ID:NAME=VALUE`` items for one broker (e.g. its broker.rack)."""
    from .testing import EmbeddedCluster, zookeeper_missing
    missing = zookeeper_missing()
    if missing:
        print(f"kafka-compat: {missing}", file=sys.stderr)
        return 1
    props = dict(_property(item) for item in overrides)
    per_broker: dict[int, dict] = {}
    for item in broker_overrides:
        broker_id, _, prop = item.partition(":")
        if not broker_id.strip().isdigit():
            raise SystemExit(f"--broker-override expects ID:NAME=VALUE, got {item!r}")
        per_broker.setdefault(int(broker_id), {}).update([_property(prop)])
    if data_dir:
        os.makedirs(data_dir, exist_ok=True)
    cluster = EmbeddedCluster(brokers, props, data_dir=data_dir, broker_overrides=per_broker)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        cluster.start()
        print(f"kafka-compat cluster: ZooKeeper {cluster.zookeeper_connect}", flush=True)
        for i, b in enumerate(cluster.brokers):
            print(f"  broker {i}: {b.bootstrap} (data {b.data_dir}, log {b.log_path})", flush=True)
        print(f"bootstrap.servers={cluster.bootstrap}", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    except (RuntimeError, TimeoutError) as e:
        print(f"kafka-compat: {e}", file=sys.stderr)
        return 1
    finally:
        print("kafka-compat cluster: stopping", flush=True)
        cluster.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    from .security import config_command
    ap = argparse.ArgumentParser(prog="kafka-compat", description="A Kafka-compatible broker.")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run a broker")
    s.add_argument("properties", nargs="?", help="a Kafka server.properties file")
    s.add_argument("--override", "-o", action="append", default=[], metavar="NAME=VALUE",
                   help="set a broker property (Kafka's name), e.g. -o num.partitions=3")
    s.add_argument("--listeners", help="shorthand for -o listeners=...")
    s.add_argument("--log-dirs", help="shorthand for -o log.dirs=...")
    s.add_argument("--log-level", default="INFO")
    c = sub.add_parser("cluster", help="run ZooKeeper and several brokers on this machine (development)")
    c.add_argument("--brokers", type=int, default=3, help="how many brokers (ids 0..N-1); default 3")
    c.add_argument("--override", "-o", action="append", default=[], metavar="NAME=VALUE",
                   help="a broker property for every broker, e.g. -o min.insync.replicas=2")
    c.add_argument("--broker-override", "-b", action="append", default=[], metavar="ID:NAME=VALUE",
                   help="a broker property for one broker, e.g. -b 0:broker.rack=RACK0")
    c.add_argument("--data-dir", help="keep data here (default: a temporary directory, removed at exit)")
    config_command.add_parser(sub)
    d = sub.add_parser("dump-log", help="print segments and indexes like Kafka's log dump tool")
    d.add_argument("files", nargs="+")
    d.add_argument("--print-data-log", action="store_true")
    d.add_argument("--remote-log-metadata-decoder", action="store_true",
                   help="decode __remote_log_metadata records: the partitions' remote segments (Kafka's option)")
    args, rest = ap.parse_known_args(argv)
    if args.command == "dump-log":
        from kafka_compat.storage.dump import main as dump_main
        decoder = None
        if args.remote_log_metadata_decoder:
            from kafka_compat.server.remote_log_metadata import describe
            decoder = describe
        return dump_main(args.files + (["--print-data-log"] if args.print_data_log else []) + rest,
                         value_decoder=decoder)
    if args.command == "configs":
        try:
            config_command.run(args)
        except (ValueError, OSError) as e:      # bad arguments, or ZooKeeper unreachable
            print(f"kafka-compat configs: {e}", file=sys.stderr)
            return 1
        return 0
    if args.command == "cluster":
        if args.brokers < 1:
            print("kafka-compat: --brokers must be at least 1", file=sys.stderr)
            return 1
        return run_cluster(args.brokers, args.override, args.data_dir, args.broker_override)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = list(args.override)
    if args.listeners:
        overrides.append(f"listeners={args.listeners}")
    if args.log_dirs:
        overrides.append(f"log.dirs={args.log_dirs}")
    try:
        config = build_config(args.properties, overrides)
    except (OSError, ValueError) as e:
        print(f"kafka-compat: {e}", file=sys.stderr)
        return 1
    return asyncio.run(serve(config))


if __name__ == "__main__":
    sys.exit(main())
