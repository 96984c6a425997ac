"""The part of Kafka's kafka-topics.sh that librdkafka's tests run, over the Admin API.

The suite shells out to `$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server B
--create|--alter|--delete --topic T [--partitions N] [--replication-factor R]
[--config k=v ...]` (with `BROKERS` as B) to make topics with configs, add
partitions and delete topics. Kafka's own tool needs a Java distribution we do
not have; this one sends the same CreateTopics / CreatePartitions / DeleteTopics
requests through confluent-kafka (interop/setup.sh installs it), and exits
non-zero on any error as the real tool does.
"""
from __future__ import annotations

import argparse
import sys

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-topics.sh")
    ap.add_argument("--bootstrap-server", required=True)
    action = ap.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true")
    action.add_argument("--alter", action="store_true")
    action.add_argument("--delete", action="store_true")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--replication-factor", type=int)
    ap.add_argument("--config", action="append", default=[])
    args = ap.parse_args(argv)

    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    if args.create:
        configs = dict(c.split("=", 1) for c in args.config)
        futures = admin.create_topics([NewTopic(args.topic, args.partitions or -1,
                                                args.replication_factor or -1, config=configs)])
    elif args.alter:
        if args.partitions is None:
            ap.error("--alter needs --partitions (the only alteration the suite makes)")
        futures = admin.create_partitions([NewPartitions(args.topic, args.partitions)])
    else:
        futures = admin.delete_topics([args.topic])
    try:
        futures[args.topic].result(30)
    except Exception as e:  # a KafkaException carrying the broker's error
        print(f"Error while executing topic command: {e}", file=sys.stderr)
        return 1
    print(f"{'Created' if args.create else 'Altered' if args.alter else 'Deleted'} topic {args.topic}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
