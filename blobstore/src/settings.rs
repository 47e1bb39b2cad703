//! Which store holds the blobs, from the environment (README's knob
//! table):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `BLOB_STORE` | `local` | `local` or `s3` |
//! | `BLOB_DIR` | `blobs` (relative to the working directory) | root of the local store |
//! | `S3_ENDPOINT` | AWS | endpoint URL of an S3-compatible service |
//! | `S3_REGION` | `us-east-1` | signing region |
//! | `S3_BUCKET` | (required with `s3`) | bucket, which must exist |
//! | `S3_ACCESS_KEY_ID`, `S3_SECRET_ACCESS_KEY` | (required with `s3`) | credentials |
//! | `S3_FORCE_PATH_STYLE` | `true` when `S3_ENDPOINT` is set, else `false` | `http://host/bucket/key` instead of `http://bucket.host/key` |

use std::fmt;
use std::path::PathBuf;

use anyhow::{bail, Context};

/// S3's smallest part is 5 MiB (all but the last); 8 MiB parts keep an
/// upload's buffer small and a 100 MB file at 13 parts.
pub const DEFAULT_PART_SIZE: usize = 8 * 1024 * 1024;
const MIN_PART_SIZE: usize = 5 * 1024 * 1024;

#[derive(Debug, Clone)]
pub enum Settings {
    Local(LocalSettings),
    S3(S3Settings),
}

#[derive(Debug, Clone)]
pub struct LocalSettings {
    /// `BLOB_DIR`: created when missing; shared by every shard node of
    /// the cluster.
    pub dir: PathBuf,
}

#[derive(Debug, Clone)]
pub struct S3Settings {
    /// `S3_ENDPOINT`; `None` is AWS itself.
    pub endpoint: Option<String>,
    /// `S3_REGION`.
    pub region: String,
    /// `S3_BUCKET`.
    pub bucket: String,
    /// `S3_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `S3_SECRET_ACCESS_KEY`.
    pub secret_access_key: SecretString,
    /// `S3_FORCE_PATH_STYLE`.
    pub force_path_style: bool,
    /// Bytes per part of a multipart upload; bodies up to this size are one
    /// `PutObject`. Not an environment knob: [`DEFAULT_PART_SIZE`].
    pub part_size: usize,
}

/// A value that never prints.
#[derive(Clone)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString(***)")
    }
}

impl Settings {
    /// A local store rooted at `dir`.
    pub fn local(dir: impl Into<PathBuf>) -> Self {
        Settings::Local(LocalSettings { dir: dir.into() })
    }

    /// From the process environment.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From `lookup` (a variable's value, if set); blank counts as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let required = |name: &str| {
            get(name).with_context(|| format!("{name} is required when BLOB_STORE is s3"))
        };
        match get("BLOB_STORE").as_deref().unwrap_or("local") {
            "local" => Ok(Self::local(
                get("BLOB_DIR").unwrap_or_else(|| "blobs".into()),
            )),
            "s3" => {
                let endpoint = get("S3_ENDPOINT");
                let force_path_style = match get("S3_FORCE_PATH_STYLE") {
                    Some(v) => boolean(&v).context("S3_FORCE_PATH_STYLE")?,
                    None => endpoint.is_some(),
                };
                Ok(Settings::S3(S3Settings {
                    endpoint,
                    region: get("S3_REGION").unwrap_or_else(|| "us-east-1".into()),
                    bucket: required("S3_BUCKET")?,
                    access_key_id: required("S3_ACCESS_KEY_ID")?,
                    secret_access_key: SecretString::new(required("S3_SECRET_ACCESS_KEY")?),
                    force_path_style,
                    part_size: DEFAULT_PART_SIZE,
                }))
            }
            other => bail!("BLOB_STORE must be local or s3, not {other:?}"),
        }
    }
}

impl S3Settings {
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.part_size < MIN_PART_SIZE {
            bail!(
                "the S3 part size must be at least 5 MiB, not {} bytes",
                self.part_size
            );
        }
        Ok(())
    }
}

fn boolean(text: &str) -> anyhow::Result<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => bail!("{text:?} is not true or false"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn from(pairs: &[(&str, &str)]) -> anyhow::Result<Settings> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn local_is_the_default() {
        let Settings::Local(l) = from(&[]).unwrap() else {
            panic!("not local")
        };
        assert_eq!(l.dir, PathBuf::from("blobs"));
        let Settings::Local(l) = from(&[("BLOB_STORE", "local"), ("BLOB_DIR", "/srv/b")]).unwrap()
        else {
            panic!("not local")
        };
        assert_eq!(l.dir, PathBuf::from("/srv/b"));
    }

    #[test]
    fn s3_needs_bucket_and_credentials() {
        let err = from(&[("BLOB_STORE", "s3"), ("S3_ACCESS_KEY_ID", "a")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "S3_BUCKET is required when BLOB_STORE is s3"
        );
        let s3 = [
            ("BLOB_STORE", "s3"),
            ("S3_BUCKET", "b"),
            ("S3_ACCESS_KEY_ID", "a"),
            ("S3_SECRET_ACCESS_KEY", "s"),
        ];
        let Settings::S3(s) = from(&s3).unwrap() else {
            panic!("not s3")
        };
        assert_eq!(
            (s.region.as_str(), s.force_path_style),
            ("us-east-1", false)
        );
        assert_eq!(s.endpoint, None);
        assert_eq!(format!("{:?}", s.secret_access_key), "SecretString(***)");
        assert!(!format!("{s:?}").contains("\"s\""));
    }

    #[test]
    fn an_endpoint_means_path_style_unless_told() {
        let mut pairs = vec![
            ("BLOB_STORE", "s3"),
            ("S3_BUCKET", "b"),
            ("S3_ACCESS_KEY_ID", "a"),
            ("S3_SECRET_ACCESS_KEY", "s"),
            ("S3_ENDPOINT", "http://127.0.0.1:9000"),
        ];
        let Settings::S3(s) = from(&pairs).unwrap() else {
            panic!("not s3")
        };
        assert!(s.force_path_style);
        pairs.push(("S3_FORCE_PATH_STYLE", "false"));
        let Settings::S3(s) = from(&pairs).unwrap() else {
            panic!("not s3")
        };
        assert!(!s.force_path_style);
        pairs.pop();
        pairs.push(("S3_FORCE_PATH_STYLE", "maybe"));
        assert!(from(&pairs).is_err());
    }

    #[test]
    fn unknown_stores_are_refused() {
        let err = from(&[("BLOB_STORE", "gcs")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "BLOB_STORE must be local or s3, not \"gcs\""
        );
    }
}
