"""Creates the demo table, lanes and alert topic on the local emulators.

The table comes from infra/table.json and the lane names from the queues tagged in
infra/template.yaml, the same sources the Rust code and its drift tests use. Endpoints,
region and credentials come from the environment the `up` script exported. Prints the alert
topic's ARN on stdout (for the env file), its report on stderr.
"""

import json
import os
import sys
from pathlib import Path

import boto3
import yaml

INFRA = Path(__file__).resolve().parent.parent


class _IgnoreTags(yaml.SafeLoader):
    """Reads CloudFormation's short-form functions (!Ref, !GetAtt) as plain nulls."""


_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


def lanes():
    template = yaml.load((INFRA / "template.yaml").read_text(), Loader=_IgnoreTags)
    names = []
    for resource in template["Resources"].values():
        for tag in resource.get("Properties", {}).get("Tags", []):
            if tag["Key"] == "cronledger:lane":
                names.append(tag["Value"])
    return names


def create_table(name):
    definition = json.loads((INFRA / "table.json").read_text())
    ttl = definition.pop("TimeToLiveSpecification")
    definition["TableName"] = name
    client = boto3.client("dynamodb")
    if name in client.list_tables()["TableNames"]:
        return
    client.create_table(**definition)
    client.get_waiter("table_exists").wait(TableName=name)
    client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)


def create_lanes(prefix, max_receive_count):
    sqs = boto3.client("sqs")
    for lane in lanes():
        dlq = sqs.create_queue(QueueName=f"{prefix}-{lane}-dlq")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        redrive = {"deadLetterTargetArn": arn, "maxReceiveCount": str(max_receive_count)}
        sqs.create_queue(
            QueueName=f"{prefix}-{lane}",
            Attributes={"RedrivePolicy": json.dumps(redrive), "VisibilityTimeout": "60"},
        )


def create_alert_topic(prefix):
    """The stack's AlertTopic, named as the template names it (STACK-alerts)."""
    return boto3.client("sns").create_topic(Name=f"{prefix}-alerts")["TopicArn"]


def main():
    table = os.environ["CRONLEDGER_TABLE"]
    prefix = os.environ["CRONLEDGER_QUEUE_PREFIX"]
    max_receive_count = int(os.environ.get("CRONLEDGER_MAX_RECEIVE_COUNT", "5"))
    create_table(table)
    create_lanes(prefix, max_receive_count)
    topic = create_alert_topic(prefix)
    print(
        f"created table {table}, lanes {', '.join(lanes())} under {prefix} and topic {topic}",
        file=sys.stderr,
    )
    print(topic)


if __name__ == "__main__":
    sys.exit(main())
