//! A real S3-compatible server on loopback (moto, started by
//! tests/s3_server.py with request signing enforced) and neardup runs that
//! hold its credentials in their environment.

use std::process::{Child, Command, Output};

use super::*;

pub struct S3 {
    child: Child,
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_s3() -> Option<S3> {
    start_s3_on("127.0.0.1")
}

/// The server listening on `host` (an address of this machine).
pub fn start_s3_on(host: &str) -> Option<S3> {
    let Ok(python) = std::env::var("NEARDUP_PYTHON") else {
        eprintln!("SKIPPED: no S3 server (set NEARDUP_PYTHON to a python with moto and boto3; tests/run.sh does)");
        return None;
    };
    let (child, info) = start_server(&python, "tests/s3_server.py", &["--host", host]);
    Some(S3 {
        child,
        endpoint: info["endpoint"].as_str().unwrap().into(),
        access_key: info["access_key"].as_str().unwrap().into(),
        secret_key: info["secret_key"].as_str().unwrap().into(),
    })
}

impl S3 {
    /// The environment a neardup process needs to reach the server, with
    /// `secret` as the secret key.
    pub fn env_with(&self, secret: &str) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", secret.to_string()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        self.env_with(&self.secret_key)
    }

    pub fn neardup_with(&self, secret: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_neardup")).args(args).envs(self.env_with(secret)).output().unwrap()
    }

    pub fn neardup(&self, args: &[&str]) -> Output {
        self.neardup_with(&self.secret_key.clone(), args)
    }
}

pub fn list_objects(s3: &S3, prefix: &str) -> Vec<String> {
    let out = Command::new(std::env::var("NEARDUP_PYTHON").unwrap())
        .args(["-c", &format!(
            "import boto3,sys; c=boto3.client('s3',endpoint_url='{}',region_name='us-east-1',aws_access_key_id='{}',aws_secret_access_key='{}'); \
             print('\\n'.join(o['Key'] for o in c.list_objects_v2(Bucket='archive',Prefix='{prefix}').get('Contents',[])))",
            s3.endpoint, s3.access_key, s3.secret_key
        )])
        .output()
        .unwrap();
    ok(&out).lines().map(str::to_string).collect()
}

pub fn get_object(s3: &S3, key: &str) -> String {
    let out = Command::new(std::env::var("NEARDUP_PYTHON").unwrap())
        .args(["-c", &format!(
            "import boto3; c=boto3.client('s3',endpoint_url='{}',region_name='us-east-1',aws_access_key_id='{}',aws_secret_access_key='{}'); \
             print(c.get_object(Bucket='archive',Key='{key}')['Body'].read().decode())",
            s3.endpoint, s3.access_key, s3.secret_key
        )])
        .output()
        .unwrap();
    ok(&out)
}

/// The MD5 of every object under `prefix`, by key below it.
pub fn object_md5s(s3: &S3, prefix: &str) -> std::collections::BTreeMap<String, String> {
    let out = Command::new(std::env::var("NEARDUP_PYTHON").unwrap())
        .args(["-c", &format!(
            "import boto3,hashlib; c=boto3.client('s3',endpoint_url='{}',region_name='us-east-1',aws_access_key_id='{}',aws_secret_access_key='{}'); \
             keys=[o['Key'] for p in c.get_paginator('list_objects_v2').paginate(Bucket='archive',Prefix='{prefix}') for o in p.get('Contents',[])]; \
             print('\\n'.join(k[len('{prefix}'):]+' '+hashlib.md5(c.get_object(Bucket='archive',Key=k)['Body'].read()).hexdigest() for k in keys))",
            s3.endpoint, s3.access_key, s3.secret_key
        )])
        .output()
        .unwrap();
    ok(&out).lines().filter_map(|l| l.rsplit_once(' ')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl super::Bucket for S3 {
    fn run(&self, args: &[&str]) -> Output {
        self.neardup(args)
    }

    fn root(&self) -> &'static str {
        "s3://archive"
    }
}
