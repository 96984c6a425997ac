"""Kafka's unsecured OAUTHBEARER token validator, for development (OAuthBearerUnsecuredValidatorCallbackHandler).

Tokens are unsigned JWS compact serializations, `base64url(header).base64url(claims).`
with header alg "none". Options come from the OAuthBearerLoginModule JAAS entry:
unsecuredValidatorPrincipalClaimName (default "sub"), unsecuredValidatorScopeClaimName
(default "scope"), unsecuredValidatorRequiredScope (space separated) and
unsecuredValidatorAllowableClockSkewMs (default 0). Anyone can mint such a token:
never enable this on a listener that untrusted clients can reach.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from typing import Any, Callable, Iterable, Mapping

from ..configdef import ConfigError
from ..protocol.sasl import OAuthBearerToken, OAuthBearerValidationError
from .jaas import OAUTHBEARER_LOGIN_MODULE, JaasEntry

_SCOPE_ITEM = re.compile(r"[\x23-\x5B\x5D-\x7E\x21]+")


def _fail(message: str, scope: str | None = None) -> OAuthBearerValidationError:
    return OAuthBearerValidationError(message, "insufficient_scope" if scope is not None else "invalid_token", scope)


def _b64url_decode(part: str) -> bytes:
    text = part.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def _convert(value: Any) -> Any:
    """JSON values as Kafka's Jackson-based reader keeps them: numbers stay numbers, arrays become lists
    of strings, everything else becomes its text."""
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _text(value)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return ""


def _json_part(part: str) -> dict[str, Any]:
    try:
        doc = json.loads(_b64url_decode(part))
    except (binascii.Error, ValueError):
        raise _fail("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(doc, dict):
        raise _fail("malformed JSON")
    return {k: _convert(v) for k, v in doc.items()}


def _java_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is not None and not isinstance(value, (int, float)):
        raise _fail(f"The '{name}' claim was not of type Number: {type(value).__name__}")
    return value


def parse_scope(text: str) -> list[str]:
    out = []
    for item in text.split(" "):
        if item:
            if not _SCOPE_ITEM.fullmatch(item):
                raise ValueError(f"Invalid scope value: {item}")
            out.append(item)
    return out


def unsecured_jws(claims: Mapping[str, Any], header: Mapping[str, Any] | None = None) -> str:
    """An unsecured JWS as Kafka's unsecured login module makes them (for tests and development clients)."""
    def enc(doc) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()
    return f"{enc(dict(header or {'alg': 'none'}))}.{enc(dict(claims))}."


class UnsecuredJwsValidator:
    """`validator(token_value) -> OAuthBearerToken`, raising OAuthBearerValidationError with Kafka's reasons."""

    def __init__(self, options: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time,
                 config_name: str = "sasl.jaas.config"):
        options = options or {}
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        try:
            self.required_scope = parse_scope((options.get("unsecuredValidatorRequiredScope") or "").strip())
            skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
            self.allowable_clock_skew_ms = int(skew) if skew else 0
        except ValueError as e:
            raise ConfigError(config_name, message=f"{config_name}: {e}") from None
        if self.allowable_clock_skew_ms < 0:
            raise ConfigError(config_name, message=f"{config_name}: Allowable clock skew millis must not be "
                                                   f"negative: {self.allowable_clock_skew_ms}")
        self._clock = clock

    @classmethod
    def from_jaas(cls, entries: Iterable[JaasEntry], clock: Callable[[], float] = time.time) -> UnsecuredJwsValidator:
        options = {}
        for entry in entries:
            if entry.login_module == OAUTHBEARER_LOGIN_MODULE:
                options = entry.options
                break
        return cls(options, clock)

    def __call__(self, token_value: str) -> OAuthBearerToken:
        if ".." in token_value:
            raise _fail("Malformed compact serialization contains '..'")
        parts = token_value.split(".")
        if len(parts) != 3:
            raise _fail("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header = _json_part(parts[0])
        claims = _json_part(parts[1])
        alg = header.get("alg")
        if alg is None:
            raise _fail("JWS header must have an Algorithm value")
        if alg != "none":
            raise _fail("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise _fail("Unsecured JWS must not contain a digital signature")
        scope = self._scope(claims)
        exp = _number(claims, "exp")
        if exp is None:
            raise _fail("No expiration time in JWT")
        principal = claims.get(self.principal_claim)
        if principal is not None and not isinstance(principal, str):
            raise _fail(f"The '{self.principal_claim}' claim was not of type String: {type(principal).__name__}")
        if principal is None or not principal.strip():
            raise _fail(f"No principal name in JWT claim: {self.principal_claim}")
        iat = _number(claims, "iat")
        now = int(self._clock() * 1000)
        skew = self.allowable_clock_skew_ms
        if iat is not None and 1000 * iat > now + skew:
            raise _fail(f"The Issued At value ({iat:f} seconds) was after the indicated time ({now} ms) plus "
                        f"allowable clock skew ({skew} ms)")
        if now - skew >= 1000 * exp:
            raise _fail(f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or after the "
                        f"Expiration Time value ({exp:f} seconds)")
        if iat is not None and exp <= iat:
            raise _fail(f"The Expiration Time time ({exp:f} seconds) was not after the Issued At time "
                        f"({iat:f} seconds)")
        for required in self.required_scope:
            if required not in scope:
                raise _fail(f"The provided scope ({_java_list(sorted(scope))}) was missing a required scope "
                            f"({required}).  All required scope elements: {_java_list(self.required_scope)}",
                            _java_list(self.required_scope))
        return OAuthBearerToken(token_value, principal, math.floor(exp * 1000 + 0.5), frozenset(scope),
                                None if iat is None else math.floor(iat * 1000 + 0.5))

    def _scope(self, claims: Mapping[str, Any]) -> set[str]:
        value = claims.get(self.scope_claim)
        if value is None:
            return set()
        if isinstance(value, str):
            return {value.strip()} if value.strip() else set()
        if isinstance(value, list):
            return {s.strip() for s in value if s.strip()}
        raise _fail(f"The '{self.scope_claim}' claim was not of type List: {type(value).__name__}")
