package arm

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// tokenLifetime is what the token endpoint answers in expires_in.
const tokenLifetime = time.Hour

// tokenKey signs access tokens. It is fixed, so that tokens stay valid
// across a simulator restart as real ones do.
var tokenKey = sha256.Sum256([]byte("hoist-cloudsim-arm-token|" + ClientSecret))

// instanceDiscovery answers MSAL's instance discovery
// (/common/discovery/instance), for clients that do not disable it.
func (h *server) instanceDiscovery(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	writeJSON(w, http.StatusOK, map[string]any{
		"tenant_discovery_endpoint": baseURL(r) + "/" + TenantID + "/v2.0/.well-known/openid-configuration",
		"api-version":               "1.1",
		"metadata": []map[string]any{{
			"preferred_network": host, "preferred_cache": host, "aliases": []string{host},
		}},
	})
}

// openIDConfiguration answers the tenant's OpenID configuration: MSAL reads
// its token endpoint and checks that the issuer is on the authority's host.
func (h *server) openIDConfiguration(w http.ResponseWriter, r *http.Request, tenant string) {
	if !strings.EqualFold(tenant, TenantID) {
		aadError(w, http.StatusBadRequest, "invalid_tenant", "AADSTS90002: Tenant '"+tenant+"' not found.")
		return
	}
	base := baseURL(r) + "/" + TenantID
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                 base + "/v2.0",
		"authorization_endpoint": base + "/oauth2/v2.0/authorize",
		"token_endpoint":         base + "/oauth2/v2.0/token",
		"jwks_uri":               baseURL(r) + "/" + TenantID + "/discovery/v2.0/keys",
		"response_types_supported": []string{
			"code", "id_token", "code id_token", "id_token token",
		},
		"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt"},
	})
}

// token is the OAuth 2.0 client credentials grant: the service principal's
// id and secret in, a bearer token for Resource Manager out.
func (h *server) token(w http.ResponseWriter, r *http.Request, tenant string) {
	if r.Method != http.MethodPost {
		aadError(w, http.StatusMethodNotAllowed, "invalid_request", "AADSTS900561: The endpoint only accepts POST requests.")
		return
	}
	if err := r.ParseForm(); err != nil {
		aadError(w, http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must contain a valid form.")
		return
	}
	switch {
	case !strings.EqualFold(tenant, TenantID):
		aadError(w, http.StatusBadRequest, "invalid_tenant", "AADSTS90002: Tenant '"+tenant+"' not found.")
	case r.PostForm.Get("grant_type") != "client_credentials":
		aadError(w, http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type.")
	case r.PostForm.Get("client_id") != ClientID:
		aadError(w, http.StatusBadRequest, "unauthorized_client",
			"AADSTS700016: Application with identifier '"+r.PostForm.Get("client_id")+"' was not found in the directory.")
	case subtle.ConstantTimeCompare([]byte(r.PostForm.Get("client_secret")), []byte(ClientSecret)) != 1:
		aadError(w, http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
	default:
		exp := h.s.Now().Add(tokenLifetime)
		writeJSON(w, http.StatusOK, map[string]any{
			"token_type":     "Bearer",
			"expires_in":     int(tokenLifetime.Seconds()),
			"ext_expires_in": int(tokenLifetime.Seconds()),
			"access_token":   signToken(ClientID, exp),
		})
	}
}

func aadError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]any{
		"error": code, "error_description": desc, "timestamp": time.Now().UTC().Format(time.RFC3339),
	})
}

// signToken returns an opaque access token for client, valid until exp: a
// payload and its HMAC, so that checking it needs no state.
func signToken(client string, exp time.Time) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(client + "|" + strconv.FormatInt(exp.Unix(), 10)))
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(payload))
}

func mac(payload string) []byte {
	m := hmac.New(sha256.New, tokenKey[:])
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// authorize checks the bearer token of a Resource Manager request.
func (h *server) authorize(r *http.Request) *armError {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errorf(http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
	}
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return errorf(http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is not a bearer token.")
	}
	payload, sig, ok := strings.Cut(tok, ".")
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(got, mac(payload)) {
		return errorf(http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
	}
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	client, expStr, _ := strings.Cut(string(raw), "|")
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || client != ClientID {
		return errorf(http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
	}
	if h.s.Now().Unix() >= exp {
		return errorf(http.StatusUnauthorized, "ExpiredAuthenticationToken", "The access token expiry UTC time is earlier than current UTC time.")
	}
	return nil
}
