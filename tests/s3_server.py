"""A real S3-compatible server on loopback for neardup's object-storage tests.

Starts moto's S3 server on 127.0.0.1 (or the address given with --host)
with request authentication enforced,
creates a user with S3 rights, an access key and a bucket, prints one JSON
line {"endpoint", "access_key", "secret_key", "bucket"} and serves until its
standard input closes (the test process ends).
"""
import json
import os
import socket
import sys

# Every request after the first four (the set-up below) must be signed with
# a key moto knows, so a wrong credential is rejected as by a real store.
os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "4"

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

host = sys.argv[sys.argv.index("--host") + 1] if "--host" in sys.argv else "127.0.0.1"
with socket.socket() as s:
    s.bind((host, 0))
    port = s.getsockname()[1]
server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
server.start()
endpoint = f"http://{host}:{port}"
setup = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **setup)
iam.create_user(UserName="neardup")
key = iam.create_access_key(UserName="neardup")["AccessKey"]
policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
iam.put_user_policy(UserName="neardup", PolicyName="s3", PolicyDocument=json.dumps(policy))
s3 = boto3.client("s3", **setup)
s3.create_bucket(Bucket="archive")
print(json.dumps({"endpoint": endpoint, "access_key": key["AccessKeyId"], "secret_key": key["SecretAccessKey"], "bucket": "archive"}), flush=True)
sys.stdin.read()
server.stop()
