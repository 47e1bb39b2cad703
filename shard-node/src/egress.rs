//! The one guard of every outbound request the node makes (webhook
//! deliveries now, attachment URL fetches later): which addresses a request
//! may reach, and HTTP clients that connect only to addresses that passed.
//!
//! * [`classify`] names what an address is: public, or one of the ranges a
//!   hosted service must never let a tenant reach (loopback, private,
//!   link-local, CGNAT, unique-local, multicast, unspecified, reserved,
//!   documentation, cloud metadata), looking through the IPv6 forms that
//!   embed an IPv4 address (mapped, compatible, 6to4, NAT64).
//! * [`Policy`]: `https` may reach public addresses and those inside
//!   `EGRESS_ALLOW_CIDRS`; plain `http` only the allowed ranges.
//! * [`Egress`] holds one client per scheme whose resolver looks the host up
//!   once and hands the connector only the addresses its policy allows, so
//!   the address connected to is the address checked (no second lookup for
//!   DNS rebinding to race). A host written as an IP literal never reaches a
//!   resolver, so [`Egress::client_for`] checks it itself. Redirects are not
//!   followed; proxies from the environment are ignored.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

/// How long one host lookup may take.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// What an address is, for the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Public,
    Unspecified,
    Loopback,
    Private,
    LinkLocal,
    SharedCgnat,
    UniqueLocal,
    Multicast,
    /// Broadcast, "this network", IETF protocol assignments, benchmarking,
    /// documentation, future use, discard-only, site-local, Teredo and
    /// local-use NAT64: nothing a webhook receiver lives at.
    Reserved,
    /// A cloud provider's instance metadata service outside the ranges
    /// above (Azure's wire server).
    CloudMetadata,
}

impl Class {
    pub const fn describe(self) -> &'static str {
        match self {
            Class::Public => "public",
            Class::Unspecified => "unspecified",
            Class::Loopback => "loopback",
            Class::Private => "private",
            Class::LinkLocal => "link-local",
            Class::SharedCgnat => "shared (CGNAT)",
            Class::UniqueLocal => "unique-local",
            Class::Multicast => "multicast",
            Class::Reserved => "reserved",
            Class::CloudMetadata => "cloud metadata",
        }
    }
}

/// What `ip` is; IPv6 forms embedding an IPv4 address are what that IPv4
/// address is.
pub fn classify(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Class {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        _ if ip.is_unspecified() => Class::Unspecified,
        (0, _, _) => Class::Reserved,
        (127, _, _) => Class::Loopback,
        (10, _, _) | (192, 168, _) => Class::Private,
        (172, 16..=31, _) => Class::Private,
        (169, 254, _) => Class::LinkLocal,
        (100, 64..=127, _) => Class::SharedCgnat,
        (224..=239, _, _) => Class::Multicast,
        (240..=255, _, _) => Class::Reserved,
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Class::Reserved,
        (198, 18..=19, _) => Class::Reserved,
        (168, 63, 129) if ip.octets()[3] == 16 => Class::CloudMetadata,
        _ => Class::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    let s = ip.segments();
    if ip.is_unspecified() {
        Class::Unspecified
    } else if ip.is_loopback() {
        Class::Loopback
    } else if s[0] & 0xffc0 == 0xfe80 {
        Class::LinkLocal
    } else if s[0] & 0xfe00 == 0xfc00 {
        Class::UniqueLocal
    } else if s[0] & 0xff00 == 0xff00 {
        Class::Multicast
    } else if s[0] & 0xffc0 == 0xfec0 // site-local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0) // Teredo: hides an IPv4 peer
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0) // discard-only
        || (s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 1)
    // local-use NAT64
    {
        Class::Reserved
    } else if s[0] & 0xe000 != 0x2000 {
        // Outside 2000::/3, the only global unicast block assigned.
        Class::Reserved
    } else {
        Class::Public
    }
}

/// The IPv4 address an IPv6 form carries: IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-compatible `::a.b.c.d`, 6to4 `2002:aabb:ccdd::/48` and the NAT64
/// well-known prefix `64:ff9b::/96`.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if s[..5] == [0; 5] && (s[5] == 0xffff || (s[5] == 0 && (s[6] != 0 || s[7] > 1))) {
        return Some(last);
    }
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(last);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

/// Which addresses each scheme may reach.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    allow: Vec<IpNet>,
}

/// What a client is told about an address the guard refused: never the
/// address itself (that would map the internal network for any tenant).
pub const NOT_PUBLIC: &str = "refused: not a public address";

/// Why an address or a URL was refused: what the client may read
/// (`Display`, the delivery log, a 400) and the detail for the node's own
/// log ([`Refusal::detail`]), which may name the resolved address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    shown: String,
    detail: String,
}

impl Refusal {
    /// A refusal whose text reveals nothing the caller did not write (a
    /// scheme, a host name it gave): shown as it is.
    pub fn plain(text: impl Into<String>) -> Refusal {
        let text = text.into();
        Refusal {
            shown: text.clone(),
            detail: text,
        }
    }

    /// A refused address: the client reads `shown`, the log `detail`.
    pub fn hidden(shown: impl Into<String>, detail: impl Into<String>) -> Refusal {
        Refusal {
            shown: shown.into(),
            detail: detail.into(),
        }
    }

    /// The same refusal with `host: ` before both texts.
    fn of_host(self, host: &str) -> Refusal {
        Refusal {
            shown: format!("{host}: {}", self.shown),
            detail: format!("{host}: {}", self.detail),
        }
    }

    /// The whole reason, for the node's log only.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl std::error::Error for Refusal {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Policy {
    /// `EGRESS_ALLOW_CIDRS` entries (`10.0.0.0/8`, `::1/128`, or a bare
    /// address meaning just that address).
    pub fn new(allow_cidrs: &[String]) -> anyhow::Result<Policy> {
        let allow = allow_cidrs
            .iter()
            .map(|c| {
                c.parse::<IpNet>()
                    .or_else(|_| c.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| anyhow::anyhow!("EGRESS_ALLOW_CIDRS: {c:?} is not a CIDR"))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Policy { allow })
    }

    fn allowed_range(&self, ip: IpAddr) -> bool {
        let plain = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.allow
            .iter()
            .any(|net| net.contains(&ip) || plain.is_some_and(|p| net.contains(&p)))
    }

    /// Ok when `scheme` may connect to `ip`, else why not.
    pub fn check(&self, scheme: Scheme, ip: IpAddr) -> Result<(), Refusal> {
        if self.allowed_range(ip) {
            return Ok(());
        }
        match (scheme, classify(ip)) {
            (Scheme::Https, Class::Public) => Ok(()),
            (Scheme::Http, Class::Public) => Err(Refusal::hidden(
                "refused: plain http may reach only the allowed private ranges; use https",
                format!("plain http may reach only the allowed private ranges ({ip} is public)"),
            )),
            (_, class) => Err(Refusal::hidden(
                NOT_PUBLIC,
                format!(
                    "{ip} is a {} address, which outbound requests may not reach",
                    class.describe()
                ),
            )),
        }
    }
}

/// The scheme of `url`, refusing anything but http and https.
pub fn scheme_of(url: &Url) -> Result<Scheme, Refusal> {
    match url.scheme() {
        "https" => Ok(Scheme::Https),
        "http" => Ok(Scheme::Http),
        other => Err(Refusal::plain(format!(
            "the URL scheme must be http or https, not {other:?}"
        ))),
    }
}

/// The policy and the two guarded clients, shared by every outbound
/// request of the node.
#[derive(Clone)]
pub struct Egress {
    policy: Arc<Policy>,
    https: reqwest::Client,
    http: reqwest::Client,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("policy", &self.policy)
            .finish()
    }
}

impl Egress {
    pub fn new(allow_cidrs: &[String]) -> anyhow::Result<Egress> {
        let policy = Arc::new(Policy::new(allow_cidrs)?);
        let client = |scheme| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .dns_resolver(Arc::new(GuardedResolver {
                    policy: policy.clone(),
                    scheme,
                }))
                .user_agent(concat!("tabula-webhooks/", env!("CARGO_PKG_VERSION")))
                .build()
        };
        Ok(Egress {
            https: client(Scheme::Https)?,
            http: client(Scheme::Http)?,
            policy,
        })
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The client to send a request to `url` with: a host written as an IP
    /// literal is checked here; a host name is checked by the client's
    /// resolver when it connects.
    pub fn client_for(&self, url: &Url) -> Result<&reqwest::Client, Refusal> {
        let scheme = scheme_of(url)?;
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.policy.check(scheme, IpAddr::V4(ip))?,
            Some(url::Host::Ipv6(ip)) => self.policy.check(scheme, IpAddr::V6(ip))?,
            Some(url::Host::Domain(_)) => {}
            None => return Err(Refusal::plain("the URL has no host")),
        }
        Ok(match scheme {
            Scheme::Https => &self.https,
            Scheme::Http => &self.http,
        })
    }

    /// The save-time check of an endpoint URL: it parses, its scheme is
    /// http or https, and every address its host resolves to now may be
    /// reached (checked again on every send). The error says what is wrong.
    pub async fn check_url(&self, text: &str) -> Result<Url, Refusal> {
        let url = Url::parse(text).map_err(|e| Refusal::plain(format!("it is not a URL ({e})")))?;
        let scheme = scheme_of(&url)?;
        let addrs: Vec<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
            Some(url::Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
            Some(url::Host::Domain(host)) => lookup(host).await?.map(|a| a.ip()).collect(),
            None => return Err(Refusal::plain("the URL has no host")),
        };
        for ip in addrs {
            self.policy.check(scheme, ip)?;
        }
        Ok(url)
    }
}

/// Every address `host` resolves to (none is a refusal).
async fn lookup(host: &str) -> Result<std::vec::IntoIter<SocketAddr>, Refusal> {
    let found = tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((host, 0)))
        .await
        .map_err(|_| Refusal::plain(format!("looking up {host} took too long")))?
        .map_err(|e| {
            Refusal::hidden(
                format!("{host} does not resolve"),
                format!("{host} does not resolve ({e})"),
            )
        })?;
    let all: Vec<SocketAddr> = found.collect();
    if all.is_empty() {
        return Err(Refusal::plain(format!("{host} resolves to no address")));
    }
    Ok(all.into_iter())
}

/// An error and its causes, `: `-separated, without repeats: for the
/// node's log only (it names addresses, ports, TLS details).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// What a client may read of a failed outbound request: the kind of
/// failure in a few words, nothing of the error chain.
pub fn failure_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the reply could not be read"
    } else {
        "the request failed"
    }
}

/// A resolver that looks the host up once and passes on only the addresses
/// its scheme's policy allows; when none is left the connection fails with
/// the reason of the first refusal.
struct GuardedResolver {
    policy: Arc<Policy>,
    scheme: Scheme,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let scheme = self.scheme;
        Box::pin(async move {
            let host = name.as_str();
            let mut allowed = Vec::new();
            let mut first_refusal = None;
            for addr in lookup(host).await? {
                match policy.check(scheme, addr.ip()) {
                    Ok(()) => allowed.push(addr),
                    Err(r) => {
                        first_refusal.get_or_insert(r);
                    }
                }
            }
            if allowed.is_empty() {
                let r = first_refusal.unwrap_or_else(|| Refusal::plain("no address"));
                return Err(Box::new(r.of_host(host)) as _);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Class {
        classify(s.parse().unwrap())
    }

    #[test]
    fn every_range_a_tenant_must_not_reach_is_named() {
        let cases = [
            ("0.0.0.0", Class::Unspecified),
            ("0.1.2.3", Class::Reserved),
            ("127.0.0.1", Class::Loopback),
            ("127.255.255.254", Class::Loopback),
            ("10.0.0.1", Class::Private),
            ("172.16.0.1", Class::Private),
            ("172.31.255.255", Class::Private),
            ("192.168.1.1", Class::Private),
            ("169.254.169.254", Class::LinkLocal),
            ("100.64.0.1", Class::SharedCgnat),
            ("100.100.100.200", Class::SharedCgnat),
            ("100.127.255.255", Class::SharedCgnat),
            ("224.0.0.1", Class::Multicast),
            ("239.255.255.250", Class::Multicast),
            ("240.0.0.1", Class::Reserved),
            ("255.255.255.255", Class::Reserved),
            ("192.0.0.8", Class::Reserved),
            ("192.0.2.1", Class::Reserved),
            ("198.18.0.1", Class::Reserved),
            ("198.51.100.7", Class::Reserved),
            ("203.0.113.9", Class::Reserved),
            ("168.63.129.16", Class::CloudMetadata),
            ("::", Class::Unspecified),
            ("::1", Class::Loopback),
            ("fe80::1", Class::LinkLocal),
            ("fc00::1", Class::UniqueLocal),
            ("fd00:ec2::254", Class::UniqueLocal),
            ("ff02::1", Class::Multicast),
            ("fec0::1", Class::Reserved),
            ("2001:db8::1", Class::Reserved),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Class::Reserved),
            ("100::1", Class::Reserved),
            ("64:ff9b:1::a00:1", Class::Reserved),
            ("4000::1", Class::Reserved),
        ];
        for (ip, want) in cases {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn ipv6_forms_are_what_the_ipv4_inside_them_is() {
        let cases = [
            ("::ffff:127.0.0.1", Class::Loopback),
            ("::ffff:10.1.2.3", Class::Private),
            ("::ffff:169.254.169.254", Class::LinkLocal),
            ("::127.0.0.1", Class::Loopback),
            ("::10.0.0.1", Class::Private),
            ("2002:7f00:1::1", Class::Loopback),
            ("2002:a9fe:a9fe::1", Class::LinkLocal),
            ("64:ff9b::127.0.0.1", Class::Loopback),
            ("64:ff9b::c0a8:101", Class::Private),
            ("::ffff:8.8.8.8", Class::Public),
            ("2002:808:808::1", Class::Public),
            ("64:ff9b::8.8.8.8", Class::Public),
        ];
        for (ip, want) in cases {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert_eq!(class(ip), Class::Public, "{ip}");
        }
    }

    #[test]
    fn https_reaches_public_and_allowed_http_only_allowed() {
        let none = Policy::new(&[]).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(none.check(Scheme::Https, ip("8.8.8.8")).is_ok());
        assert!(none.check(Scheme::Http, ip("8.8.8.8")).is_err());
        assert!(none.check(Scheme::Https, ip("127.0.0.1")).is_err());
        assert!(none.check(Scheme::Http, ip("127.0.0.1")).is_err());
        let local = Policy::new(&["127.0.0.0/8".into(), "::1".into()]).unwrap();
        assert!(local.check(Scheme::Http, ip("127.0.0.1")).is_ok());
        assert!(local.check(Scheme::Http, ip("::ffff:127.0.0.1")).is_ok());
        assert!(local.check(Scheme::Https, ip("::1")).is_ok());
        assert!(local.check(Scheme::Http, ip("10.0.0.1")).is_err());
        assert!(local.check(Scheme::Http, ip("169.254.169.254")).is_err());
        let msg = none
            .check(Scheme::Https, ip("169.254.169.254"))
            .unwrap_err();
        assert!(msg.detail().contains("link-local"), "{msg:?}");
        assert_eq!(msg.to_string(), NOT_PUBLIC);
        assert!(Policy::new(&["not-a-cidr".into()]).is_err());
    }

    /// What a client reads never names the refused address (it would map
    /// the internal network); the log's detail does.
    #[test]
    fn a_shown_refusal_names_no_address() {
        let none = Policy::new(&[]).unwrap();
        for ip in [
            "10.1.2.3",
            "127.0.0.1",
            "169.254.169.254",
            "fd00::1",
            "8.8.4.4",
        ] {
            let addr: IpAddr = ip.parse().unwrap();
            for scheme in [Scheme::Http, Scheme::Https] {
                let Err(r) = none.check(scheme, addr) else {
                    continue;
                };
                let shown = r.to_string();
                assert!(!shown.contains(ip), "{shown}");
                assert!(shown.starts_with("refused: "), "{shown}");
                assert!(r.detail().contains(ip), "{r:?}");
            }
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_without_an_allow_list() {
        let none = Egress::new(&[]).unwrap();
        let err = none.check_url("https://localhost:9/x").await.unwrap_err();
        assert!(err.detail().contains("loopback"), "{err:?}");
        assert_eq!(err.to_string(), NOT_PUBLIC);
        assert!(none.check_url("ftp://example.com/").await.is_err());
        assert!(none.check_url("not a url").await.is_err());
        let url: Url = "http://127.0.0.1:9/".parse().unwrap();
        assert!(none.client_for(&url).is_err());
        let local = Egress::new(&["127.0.0.0/8".into(), "::1/128".into()]).unwrap();
        assert!(local.check_url("http://localhost:9/x").await.is_ok());
        assert!(local.client_for(&url).is_ok());
    }

    #[tokio::test]
    async fn the_client_refuses_to_connect_to_a_name_resolving_to_loopback() {
        // A real listener the request would reach if the guard let it.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let none = Egress::new(&[]).unwrap();
        let url: Url = format!("https://localhost:{port}/hook").parse().unwrap();
        let client = none.client_for(&url).unwrap();
        let err = client.post(url).send().await.unwrap_err();
        let text = format!("{err:?}");
        assert!(text.contains("loopback"), "{text}");
    }
}
