//! Secrets a worker needs: those of the platforms its ledger's running jobs use, not of every
//! configured platform. `work` calls [`check_running_jobs`] at start and exits 2 on
//! [`SecretsError::Missing`] (the message names each variable and job), 1 on the others.
//! The gateway builds no client for a platform whose secret is missing, so a worker with no
//! job on that platform runs; without this check a job that does use it would fail every
//! item Fatal instead of the worker refusing to start.

use super::spec::{JobKind, JobSpec};
use crate::config::Config;
use crate::platform::Platform;
use crate::store::{Store, StoreError};
use std::fmt;

/// One running job's platform this worker cannot call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSecretProblem {
    /// The running job.
    pub job_id: i64,
    pub(crate) kind: JobKind,
    pub(crate) platform: Platform,
    /// The unset secret variable; None when the config has no `[platforms.X]` at all.
    pub(crate) missing_var: Option<String>,
}

impl fmt::Display for JobSecretProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let JobSecretProblem {
            job_id,
            kind,
            platform,
            ..
        } = self;
        match &self.missing_var {
            Some(var) => write!(
                f,
                "job {job_id} ({kind}) calls {platform}, but environment variable {var} is not \
                 set (it must hold the {platform} secret or the shop's session)"
            ),
            None => write!(
                f,
                "job {job_id} ({kind}) calls {platform}, but the config has no \
                 [platforms.{platform}]"
            ),
        }
    }
}

/// Why the secrets check at worker start failed.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// Running jobs use platforms this worker has no secret (or no config) for: exit 2.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Missing(Vec<JobSecretProblem>),
    /// The ledger could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A running job's stored spec does not parse (written by a newer version?).
    #[error("job {job_id}: unreadable spec in the ledger: {reason}")]
    BadSpec {
        /// The job whose spec does not parse.
        job_id: i64,
        /// The parse error.
        reason: String,
    },
}

impl SecretsError {
    /// True for what the operator must fix in the environment or config (exit 2).
    pub fn is_input_error(&self) -> bool {
        matches!(self, SecretsError::Missing(_))
    }
}

/// Check that every platform of the ledger's running jobs has a client config and all its
/// secret variables set (read from this process's environment; values never shown).
pub async fn check_running_jobs(store: &Store, cfg: &Config) -> Result<(), SecretsError> {
    let mut jobs = Vec::new();
    for (job_id, text) in store.running_job_specs().await? {
        let spec: JobSpec = serde_json::from_str(&text).map_err(|e| SecretsError::BadSpec {
            job_id,
            reason: e.to_string(),
        })?;
        jobs.push((job_id, spec));
    }
    check_specs(cfg, &jobs)
}

/// [`check_running_jobs`] for given jobs: every problem, in job order.
pub(crate) fn check_specs(cfg: &Config, jobs: &[(i64, JobSpec)]) -> Result<(), SecretsError> {
    let mut problems = Vec::new();
    for (job_id, spec) in jobs {
        for platform in spec.platforms() {
            let missing_var = match cfg.platform(platform) {
                None => None,
                Some(pc) => match pc.missing_secret() {
                    Some(m) => Some(m.var),
                    None => continue,
                },
            };
            problems.push(JobSecretProblem {
                job_id: *job_id,
                kind: spec.kind(),
                platform,
                missing_var,
            });
        }
        // The job's shop's own session, when `[shops.<name>]` names one.
        if let Err(crate::config::ShopError::MissingSession { missing, .. }) =
            cfg.shop_session(spec.shop_platform(), spec.shop())
        {
            problems.push(JobSecretProblem {
                job_id: *job_id,
                kind: spec.kind(),
                platform: spec.shop_platform(),
                missing_var: Some(missing.var),
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(SecretsError::Missing(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_every_job_platform_without_a_secret_or_config() {
        let cfg = Config::parse(
            Path::new("client.toml"),
            "[platforms.taobao]\nendpoint = \"http://127.0.0.1:1/router/rest\"\napp_key = \"k\"\n\
             secret_env = \"SF_SECRETS_UNIT_NEVER_SET\"\n",
        )
        .unwrap();
        let listing = JobSpec::Listing {
            from: Platform::Alibaba,
            to: Platform::Taobao,
            items_file: None,
            items: vec!["1".into()],
            to_shop: crate::jobs::spec::DEFAULT_SHOP.into(),
            relist: false,
            allow_stale_source_s: None,
            lane: Default::default(),
            map_file: None,
            map: None,
            shop_listing: Default::default(),
        };
        let err = check_specs(&cfg, &[(7, listing)]).unwrap_err();
        assert!(err.is_input_error());
        let text = err.to_string();
        assert_eq!(
            text,
            "job 7 (listing) calls alibaba, but the config has no [platforms.alibaba]\n\
             job 7 (listing) calls taobao, but environment variable SF_SECRETS_UNIT_NEVER_SET \
             is not set (it must hold the taobao secret or the shop's session)"
        );
        assert!(check_specs(&cfg, &[]).is_ok());
    }
}
