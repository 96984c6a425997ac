"""The part of Kafka's kafka-acls.sh that librdkafka's tests run, over the Admin API.

The suite shells out to `$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server B --add
--allow-principal|--deny-principal P --operation Op --allow-host|--deny-host H --topic T`
(tests 0109, 0115, 0119) to switch topics off for everyone. Kafka's own tool needs a Java
distribution we do not have; this one sends the same CreateAcls / DeleteAcls / DescribeAcls
requests through confluent-kafka, with the tool's option names and defaults (hosts '*',
literal patterns), and exits non-zero on any error as the real tool does.
"""
from __future__ import annotations

import argparse
import re
import sys

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)


def enum_value(enum, name: str):
    """'DescribeConfigs', 'describe-configs' or 'DESCRIBE_CONFIGS' -> the member, as the tool reads them."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).replace("-", "_").upper()
    return enum[key]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-acls.sh")
    ap.add_argument("--bootstrap-server", required=True)
    action = ap.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    ap.add_argument("--allow-principal", action="append", default=[])
    ap.add_argument("--deny-principal", action="append", default=[])
    ap.add_argument("--allow-host", action="append", default=[])
    ap.add_argument("--deny-host", action="append", default=[])
    ap.add_argument("--operation", action="append", default=[])
    ap.add_argument("--topic", action="append", default=[])
    ap.add_argument("--group", action="append", default=[])
    ap.add_argument("--transactional-id", action="append", default=[])
    ap.add_argument("--cluster", action="store_true")
    ap.add_argument("--resource-pattern-type", default=None)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)

    resources = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group] + \
        [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id] + \
        ([(ResourceType.BROKER, "kafka-cluster")] if args.cluster else [])
    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    try:
        if args.list:
            pattern = enum_value(ResourcePatternType, args.resource_pattern_type or "any")
            filters = [AclBindingFilter(t, n, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY)
                       for t, n in resources] or [AclBindingFilter(ResourceType.ANY, None, pattern, None, None,
                                                                   AclOperation.ANY, AclPermissionType.ANY)]
            for f in filters:
                for binding in admin.describe_acls(f).result(30):
                    print(binding)
            return 0
        pattern = enum_value(ResourcePatternType, args.resource_pattern_type or "literal")
        operations = [enum_value(AclOperation, op) for op in args.operation or ["All"]]
        entries = [(p, h, AclPermissionType.ALLOW) for p in args.allow_principal for h in args.allow_host or ["*"]]
        entries += [(p, h, AclPermissionType.DENY) for p in args.deny_principal for h in args.deny_host or ["*"]]
        if not resources or not entries:
            ap.error("name a resource (--topic, --group, --cluster, --transactional-id) and a principal")
        if args.add:
            bindings = [AclBinding(t, n, pattern, p, h, op, perm) for t, n in resources for p, h, perm in entries
                        for op in operations]
            futures = admin.create_acls(bindings)
        else:
            bindings = [AclBindingFilter(t, n, pattern, p, h, op, perm) for t, n in resources
                        for p, h, perm in entries for op in operations]
            futures = admin.delete_acls(bindings)
        for binding, future in futures.items():
            future.result(30)
            print(f"{'Adding' if args.add else 'Removing'} ACL: {binding}")
    except Exception as e:  # a KafkaException carrying the broker's error
        print(f"Error while executing ACL command: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
