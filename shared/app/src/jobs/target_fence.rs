//! Which addresses an http job may reach. In Lambda, 127.0.0.1:9001 is the Runtime API of
//! the worker's own invocation and 169.254.0.0/16 holds the credentials and metadata
//! endpoints: no job calls them. Private addresses stay allowed (internal services are the
//! usual target); a deployment narrows targets further with an allowlist.
//!
//! The check is on the address actually connected to: named hosts go through
//! [`FencedResolver`], so a name that resolves to a fenced address at call time (DNS
//! rebinding) is refused as well as a literal one.

use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use cronledger_core::http_target::forbidden_address;
use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The code of a call the fence refused (permanent: the target will not change).
pub const TARGET_FORBIDDEN: &str = "HTTP_TARGET_FORBIDDEN";

/// Comma-separated hosts (`api.example.com`, `*.internal.example.com`) and addresses or
/// CIDRs (`10.0.0.0/8`); empty: every address but loopback and link-local.
pub const ALLOWLIST_ENV: &str = "CRONLEDGER_HTTP_ALLOWLIST";

/// `1`/`true`: loopback targets are allowed (the local runner; never in AWS).
pub const ALLOW_LOOPBACK_ENV: &str = "CRONLEDGER_HTTP_ALLOW_LOOPBACK";

/// Whether [`ALLOW_LOOPBACK_ENV`] says `1` or `true`.
pub fn loopback_allowed_by_env() -> bool {
    let value = std::env::var(ALLOW_LOOPBACK_ENV).unwrap_or_default();
    matches!(value.trim(), "1" | "true")
}

/// The addresses an http job may call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetFence {
    allow_loopback: bool,
    allowlist: Vec<AllowedTarget>,
}

#[derive(Debug, Clone, PartialEq)]
enum AllowedTarget {
    /// A host name, lowercase.
    Host(String),
    /// `*.example.com`, kept as `.example.com`.
    Subdomains(String),
    Network(IpNet),
}

/// An allowlist entry that is neither a host, a `*.` pattern nor an address or CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HTTP_ALLOWLIST_INVALID: `{0}` is not a host, `*.domain`, address or CIDR")]
pub struct AllowlistInvalid(pub String);

/// Why the fence refused a call: names the host and address, which are not secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FenceRefusal(pub String);

impl TargetFence {
    /// Loopback allowed too: for the local runner, whose receiver is on 127.0.0.1.
    pub fn allowing_loopback(mut self) -> TargetFence {
        self.allow_loopback = true;
        self
    }

    /// Only these hosts and networks (see [`ALLOWLIST_ENV`] for the format).
    pub fn with_allowlist(mut self, list: &str) -> Result<TargetFence, AllowlistInvalid> {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            self.allowlist.push(parse_entry(entry)?);
        }
        Ok(self)
    }

    /// The fence a deployment configured ([`ALLOWLIST_ENV`], [`ALLOW_LOOPBACK_ENV`]).
    pub fn from_env() -> Result<TargetFence, AllowlistInvalid> {
        let mut fence = TargetFence::default();
        if loopback_allowed_by_env() {
            fence = fence.allowing_loopback();
        }
        fence.with_allowlist(&std::env::var(ALLOWLIST_ENV).unwrap_or_default())
    }

    /// Whether a call to `ip` (reached through the name `host`, if any) is allowed.
    pub fn check(&self, host: Option<&str>, ip: IpAddr) -> Result<(), FenceRefusal> {
        let shown = host
            .map(|h| format!("`{h}` ({ip})"))
            .unwrap_or(ip.to_string());
        if let Some(kind) = forbidden_address(ip) {
            if !(self.allow_loopback && kind.is_local_host()) {
                return Err(FenceRefusal(format!(
                    "{shown} is {}; http jobs may not call it",
                    kind.describe()
                )));
            }
        }
        if self.allowlist.is_empty() || self.allowlist.iter().any(|a| a.admits(host, ip)) {
            return Ok(());
        }
        Err(FenceRefusal(format!(
            "{shown} is not in this deployment's target allowlist"
        )))
    }

    /// Checks a url whose host is a literal address (no resolution happens for those);
    /// named hosts are checked by [`FencedResolver`] on the addresses they resolve to.
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), FenceRefusal> {
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check(None, IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check(None, IpAddr::V6(ip)),
            _ => Ok(()),
        }
    }
}

impl AllowedTarget {
    fn admits(&self, host: Option<&str>, ip: IpAddr) -> bool {
        let host = host.map(|h| h.trim_end_matches('.').to_ascii_lowercase());
        match self {
            AllowedTarget::Host(name) => host.as_deref() == Some(name.as_str()),
            AllowedTarget::Subdomains(suffix) => host.is_some_and(|h| h.ends_with(suffix)),
            AllowedTarget::Network(net) => net.contains(&ip),
        }
    }
}

fn parse_entry(entry: &str) -> Result<AllowedTarget, AllowlistInvalid> {
    if let Ok(net) = entry.parse::<IpNet>() {
        return Ok(AllowedTarget::Network(net));
    }
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Ok(AllowedTarget::Network(IpNet::from(ip)));
    }
    let lower = entry.trim_end_matches('.').to_ascii_lowercase();
    let (name, subdomains) = match lower.strip_prefix("*.") {
        Some(rest) => (rest, true),
        None => (lower.as_str(), false),
    };
    let is_name = !name.is_empty()
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    match (is_name, subdomains) {
        (false, _) => Err(AllowlistInvalid(entry.to_string())),
        (true, true) => Ok(AllowedTarget::Subdomains(format!(".{name}"))),
        (true, false) => Ok(AllowedTarget::Host(name.to_string())),
    }
}

/// Resolves names as the system does, then keeps only the addresses the fence allows: the
/// connection can only go to one of those. None left: the call is refused.
#[derive(Debug, Clone)]
pub struct FencedResolver {
    fence: Arc<TargetFence>,
}

impl FencedResolver {
    pub fn new(fence: Arc<TargetFence>) -> FencedResolver {
        FencedResolver { fence }
    }
}

impl Resolve for FencedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let fence = self.fence.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusal = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match fence.check(Some(&host), addr.ip()) {
                    Ok(()) => true,
                    Err(refused) => {
                        refusal.get_or_insert(refused);
                        false
                    }
                })
                .collect();
            match refusal.filter(|_| allowed.is_empty()) {
                Some(refused) => Err(Box::new(refused) as Box<dyn StdError + Send + Sync>),
                None => Ok(Box::new(allowed.into_iter()) as Addrs),
            }
        })
    }
}

/// The fence's refusal somewhere in an error's chain (the HTTP client wraps it).
pub fn refusal_in<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a FenceRefusal> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(refused) = e.downcast_ref::<FenceRefusal>() {
            return Some(refused);
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn by_default_everything_but_loopback_and_link_local_is_allowed() {
        let fence = TargetFence::default();
        assert!(fence.check(Some("svc.internal"), ip("10.0.0.7")).is_ok());
        assert!(fence.check(None, ip("203.0.113.9")).is_ok());
        for refused in [
            "127.0.0.1",
            "169.254.169.254",
            "::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
        ] {
            assert!(fence.check(Some("x"), ip(refused)).is_err(), "{refused}");
        }
        let local = TargetFence::default().allowing_loopback();
        assert!(local.check(Some("localhost"), ip("127.0.0.1")).is_ok());
        assert!(local.check(None, ip("169.254.169.254")).is_err());
    }

    #[test]
    fn an_allowlist_admits_its_hosts_subdomains_and_networks_only() {
        let fence = TargetFence::default()
            .with_allowlist(" api.example.com, *.corp.example ,10.1.0.0/16,192.0.2.8 ")
            .expect("valid");
        assert!(fence
            .check(Some("API.example.com."), ip("198.51.100.1"))
            .is_ok());
        assert!(fence
            .check(Some("a.b.corp.example"), ip("198.51.100.1"))
            .is_ok());
        assert!(fence
            .check(Some("corp.example"), ip("198.51.100.1"))
            .is_err());
        assert!(fence.check(Some("other.example"), ip("10.1.200.3")).is_ok());
        assert!(fence.check(None, ip("192.0.2.8")).is_ok());
        assert!(fence.check(None, ip("192.0.2.9")).is_err());
        // An allowed name that resolves to a fenced address is still refused.
        assert!(fence
            .check(Some("api.example.com"), ip("169.254.169.254"))
            .is_err());
        for bad in ["http://x", "a..b", "10.0.0.0/33", "*."] {
            assert!(TargetFence::default().with_allowlist(bad).is_err(), "{bad}");
        }
    }
}
