package gce

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// tokenPath is the simulated https://oauth2.googleapis.com/token.
const tokenPath = "/token"

// saEmail is the simulator's service account.
const saEmail = "hoist@" + Project + ".iam.gserviceaccount.com"

// jwtBearer is the OAuth2 grant a service account uses (RFC 7523).
const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// A saKey is the service account's key pair, kept as a sim resource so that
// a restarted simulator accepts the credentials it handed out before.
type saKey struct {
	id   string
	key  *rsa.PrivateKey
	pem  string
	hmac []byte // signs access tokens
}

// serviceAccount returns the simulator's service account key, creating it on
// first use.
func (p *Provider) serviceAccount(s *sim.Sim) (*saKey, error) {
	p.saMu.Lock()
	defer p.saMu.Unlock()
	if k := p.sa[s]; k != nil {
		return k, nil
	}
	r, ok := s.Get(Name, "service-account")
	if !ok {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, err
		}
		kid := make([]byte, 20)
		_, _ = rand.Read(kid)
		r, err = s.Create(sim.Resource{Provider: Name, Kind: kindServiceAccount, ID: "service-account", Name: saEmail,
			State: sim.StateAvailable, Extra: map[string]string{
				"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
				"private_key_id": fmt.Sprintf("%x", kid),
			}})
		if err != nil {
			return nil, err
		}
	}
	block, _ := pem.Decode([]byte(r.Extra["private_key"]))
	if block == nil {
		return nil, errors.New("service account key: no PEM block")
	}
	pk, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	rk, ok := pk.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("service account key: not RSA")
	}
	mac := sha256.Sum256(append([]byte("access-token:"), block.Bytes...))
	k := &saKey{id: r.Extra["private_key_id"], key: rk, pem: r.Extra["private_key"], hmac: mac[:]}
	p.sa[s] = k
	return k, nil
}

// json is the service account's key file as the IAM console downloads it
// (https://cloud.google.com/iam/docs/keys-create-delete), token_uri at the
// simulator.
func (k *saKey) json(tokenURI string) []byte {
	b, _ := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  Project,
		"private_key_id":              k.id,
		"private_key":                 k.pem,
		"client_email":                saEmail,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   tokenURI,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"universe_domain":             "googleapis.com",
	}, "", "  ")
	return b
}

// token answers the JWT-bearer grant (RFC 7523, Google's
// https://developers.google.com/identity/protocols/oauth2/service-account#httprest):
// the assertion must be an RS256 JWT signed by the service account's key,
// issued by its email for this token URI.
func (p *Provider) token(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
	fail := func(code, desc string) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		fail("invalid_request", err.Error())
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != jwtBearer {
		fail("unsupported_grant_type", "Invalid grant_type: "+gt)
		return
	}
	k, err := p.serviceAccount(s)
	if err != nil {
		fail("internal_failure", err.Error())
		return
	}
	claims, err := verifyJWT(r.PostForm.Get("assertion"), &k.key.PublicKey)
	if err != nil {
		fail("invalid_grant", "Invalid JWT Signature.")
		return
	}
	now := s.Now()
	switch {
	case claims.Iss != saEmail:
		fail("invalid_grant", "Invalid JWT: iss is not a known service account.")
	case claims.Aud != "http://"+r.Host+tokenPath && claims.Aud != "https://"+r.Host+tokenPath:
		fail("invalid_grant", "Invalid JWT: aud must be the token URI.")
	case claims.Exp < now.Unix() || claims.Iat > now.Add(time.Minute).Unix():
		fail("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
	case claims.Scope == "":
		fail("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
	default:
		exp := now.Add(time.Hour)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": k.accessToken(exp),
			"expires_in":   3599,
			"token_type":   "Bearer",
		})
	}
}

type jwtClaims struct {
	Iss   string `json:"iss"`
	Aud   string `json:"aud"`
	Scope string `json:"scope"`
	Exp   int64  `json:"exp"`
	Iat   int64  `json:"iat"`
}

func verifyJWT(tok string, pub *rsa.PublicKey) (jwtClaims, error) {
	var c jwtClaims
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return c, errors.New("jwt: not three parts")
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return c, err
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(hb, &h); err != nil || h.Alg != "RS256" {
		return c, fmt.Errorf("jwt: alg %q", h.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return c, err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return c, err
	}
	cb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(cb, &c)
}

// accessToken is "ya29.sim.<expiry>.<mac>": checkable without state, so it
// survives a simulator restart as long as the key does.
func (k *saKey) accessToken(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return "ya29.sim." + e + "." + k.mac(e)
}

func (k *saKey) mac(s string) string {
	m := hmac.New(sha256.New, k.hmac)
	m.Write([]byte(s))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// authorize checks the request's Bearer token; nil means authorized.
func (p *Provider) authorize(s *sim.Sim, r *http.Request) *apiError {
	unauth := &apiError{Code: http.StatusUnauthorized, Reason: "authError",
		Message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		unauth.Reason, unauth.Message = "required", "Login Required."
		return unauth
	}
	rest, ok := strings.CutPrefix(tok, "ya29.sim.")
	if !ok {
		return unauth
	}
	e, mac, ok := strings.Cut(rest, ".")
	if !ok {
		return unauth
	}
	k, err := p.serviceAccount(s)
	if err != nil {
		return &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || !hmac.Equal([]byte(mac), []byte(k.mac(e))) || exp < s.Now().Unix() {
		return unauth
	}
	return checkScope(r)
}
