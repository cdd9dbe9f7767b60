//! SigV4 for API Gateway with IAM authorization: the headers that sign one request.
//!
//! Kept apart from the HTTP client, with the clock passed in, so a signature can be checked
//! offline against known answers (the AWS SigV4 test suite, and a reference computation of
//! the documented algorithm in the tests below).

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;

use crate::CliError;

/// API Gateway's signing name.
pub const EXECUTE_API: &str = "execute-api";

/// Who signs, for which region and service.
pub struct Signer {
    pub region: String,
    pub service: String,
    pub credentials: Credentials,
}

fn fail(e: impl std::fmt::Display) -> CliError {
    CliError::msg(format!("REMOTE_SIGNING: {e}"))
}

/// The `Host` header value for `url`: with the port when it is not the scheme's default,
/// as HTTP clients send it (the signature covers it, so both must agree).
pub fn host_of(url: &str) -> Result<String, CliError> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| CliError::msg(format!("REMOTE_BAD_URL: {e}")))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| CliError::msg(format!("REMOTE_BAD_URL: `{url}` has no host")))?;
    Ok(match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    })
}

impl Signer {
    /// The headers to add to the request (`x-amz-date`, `authorization`, and
    /// `x-amz-security-token` for temporary credentials). `headers` are the request's other
    /// headers, lowercase, `host` included: every one of them is signed.
    pub fn sign(
        &self,
        method: &str,
        url: &str,
        headers: &[(String, String)],
        body: &[u8],
        at: SystemTime,
    ) -> Result<Vec<(String, String)>, CliError> {
        let identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.service)
            .time(at)
            .settings(SigningSettings::default())
            .build()
            .map_err(fail)?
            .into();
        let signable = SignableRequest::new(
            method,
            url,
            headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            SignableBody::Bytes(body),
        )
        .map_err(fail)?;
        let (instructions, _) = sign(signable, &params).map_err(fail)?.into_parts();
        Ok(instructions
            .headers()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use sha2::{Digest, Sha256};

    use super::*;

    /// 2015-08-30T12:36:00Z, the test suite's instant.
    fn suite_time() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_440_938_160)
    }

    const SUITE_KEY: &str = "AKIDEXAMPLE";
    const SUITE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    fn suite_signer(token: Option<&str>) -> Signer {
        Signer {
            region: "us-east-1".into(),
            service: "service".into(),
            credentials: Credentials::new(
                SUITE_KEY,
                SUITE_SECRET,
                token.map(str::to_string),
                None,
                "test",
            ),
        }
    }

    fn header<'a>(signed: &'a [(String, String)], name: &str) -> &'a str {
        signed
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    fn host(url: &str) -> Vec<(String, String)> {
        vec![("host".to_string(), host_of(url).expect("a host"))]
    }

    /// Known answers from the AWS SigV4 test suite (`aws-signing-test-suite/v4`):
    /// `get-vanilla-query-order-key-case`, `post-vanilla-query` and
    /// `get-vanilla-with-session-token`, header signatures.
    #[test]
    fn matches_the_aws_sigv4_test_suite() {
        let cases = [
            (
                "GET",
                "https://example.amazonaws.com/?Param2=value2&Param1=value1",
                None,
                "host;x-amz-date",
                "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            ),
            (
                "POST",
                "https://example.amazonaws.com/?Param1=value1",
                None,
                "host;x-amz-date",
                "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
            ),
            (
                "GET",
                "https://example.amazonaws.com/",
                Some("6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"),
                "host;x-amz-date;x-amz-security-token",
                "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
            ),
        ];
        for (method, url, token, signed_headers, signature) in cases {
            let signed = suite_signer(token)
                .sign(method, url, &host(url), b"", suite_time())
                .expect("signed");
            assert_eq!(header(&signed, "x-amz-date"), "20150830T123600Z");
            assert_eq!(
                header(&signed, "authorization"),
                format!(
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                     SignedHeaders={signed_headers}, Signature={signature}"
                ),
                "{method} {url}"
            );
            if let Some(token) = token {
                assert_eq!(header(&signed, "x-amz-security-token"), token);
            }
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn sha256(data: &[u8]) -> Vec<u8> {
        Sha256::digest(data).to_vec()
    }

    /// HMAC-SHA256 (RFC 2104), written out so the reference shares no code with the signer.
    fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut block = [0u8; 64];
        if key.len() > 64 {
            block[..32].copy_from_slice(&sha256(key));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
        let inner = sha256(&[pad(0x36), data.to_vec()].concat());
        sha256(&[pad(0x5c), inner].concat())
    }

    /// The documented algorithm, step by step, for one fixed api request: canonical request
    /// (double-encoded path, sorted query, sorted lowercase headers, payload hash), string to
    /// sign, derived key, signature.
    #[test]
    fn an_api_request_signs_as_the_documented_algorithm_computes() {
        let url = "https://abc123.execute-api.eu-west-1.amazonaws.com/v1/schedules/nightly/runs?trigger=MANUAL&limit=5";
        let body = br#"{"mode":"reuse","note":"month end"}"#;
        let headers = vec![
            (
                "host".to_string(),
                "abc123.execute-api.eu-west-1.amazonaws.com".to_string(),
            ),
            ("content-type".to_string(), "application/json".to_string()),
            ("idempotency-key".to_string(), "cli-42".to_string()),
        ];
        let signer = Signer {
            region: "eu-west-1".into(),
            service: EXECUTE_API.into(),
            credentials: Credentials::new(SUITE_KEY, SUITE_SECRET, None, None, "test"),
        };
        let signed = signer
            .sign("POST", url, &headers, body, suite_time())
            .expect("signed");

        let canonical = [
            "POST",
            "/v1/schedules/nightly/runs",
            "limit=5&trigger=MANUAL",
            "content-type:application/json",
            "host:abc123.execute-api.eu-west-1.amazonaws.com",
            "idempotency-key:cli-42",
            "x-amz-date:20150830T123600Z",
            "",
            "content-type;host;idempotency-key;x-amz-date",
            &hex(&sha256(body)),
        ]
        .join("\n");
        let scope = "20150830/eu-west-1/execute-api/aws4_request";
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n20150830T123600Z\n{scope}\n{}",
            hex(&sha256(canonical.as_bytes()))
        );
        let mut key = hmac(format!("AWS4{SUITE_SECRET}").as_bytes(), b"20150830");
        for part in ["eu-west-1", "execute-api", "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let signature = hex(&hmac(&key, to_sign.as_bytes()));
        assert_eq!(
            header(&signed, "authorization"),
            format!(
                "AWS4-HMAC-SHA256 Credential={SUITE_KEY}/{scope}, \
                 SignedHeaders=content-type;host;idempotency-key;x-amz-date, Signature={signature}"
            )
        );
    }

    #[test]
    fn the_host_keeps_a_port_that_is_not_the_default() {
        assert_eq!(
            host_of("https://x.execute-api.us-east-1.amazonaws.com/v1").unwrap(),
            "x.execute-api.us-east-1.amazonaws.com"
        );
        assert_eq!(
            host_of("http://127.0.0.1:8089/v1").unwrap(),
            "127.0.0.1:8089"
        );
        assert!(host_of("not a url").is_err());
    }
}
