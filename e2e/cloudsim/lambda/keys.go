package lambda

import (
	"net/http"
	"strings"

	"golang.org/x/crypto/ssh"

	"hoist/e2e/cloudsim/sim"
)

// keys returns the account's SSH keys, oldest first.
func keys(s *sim.Sim) []sim.Resource {
	var out []sim.Resource
	for _, r := range s.List(Name, KindSSHKey) {
		if r.State != sim.StateDeleted {
			out = append(out, r)
		}
	}
	return out
}

func findKey(s *sim.Sim, name string) (sim.Resource, bool) {
	for _, r := range keys(s) {
		if r.Name == name {
			return r, true
		}
	}
	return sim.Resource{}, false
}

func keyJSON(r sim.Resource) map[string]any {
	return map[string]any{"id": r.ID, "name": r.Name, "public_key": r.Extra[extraPublicKey]}
}

func (p *Provider) listKeys(s *sim.Sim, r *http.Request) (any, *apiError) {
	out := []map[string]any{}
	for _, k := range keys(s) {
		out = append(out, keyJSON(k))
	}
	return out, nil
}

// addKey adds a key; without public_key Lambda generates a pair and returns
// the private key too, which the simulator does not do.
func (p *Provider) addKey(s *sim.Sim, r *http.Request) (any, *apiError) {
	var req struct {
		Name      string `json:"name"`
		PublicKey string `json:"public_key"`
	}
	if e := decode(r, &req); e != nil {
		return nil, e
	}
	req.PublicKey = strings.TrimSpace(req.PublicKey)
	if req.Name == "" || len(req.Name) > 64 {
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "name must be 1 to 64 characters")
	}
	if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey)); err != nil {
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "Invalid public key: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := findKey(s, req.Name); ok {
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "An SSH key named %q already exists", req.Name)
	}
	res, err := s.Create(sim.Resource{Provider: Name, Kind: KindSSHKey, ID: p.newID(), Name: req.Name,
		State: sim.StateAvailable, Extra: map[string]string{extraPublicKey: req.PublicKey}})
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "global/unknown", "%v", err)
	}
	return keyJSON(res), nil
}

func (p *Provider) deleteKey(s *sim.Sim, r *http.Request) (any, *apiError) {
	id := r.PathValue("id")
	p.mu.Lock()
	defer p.mu.Unlock()
	res, ok := s.Get(Name, id)
	if !ok || res.Kind != KindSSHKey || res.State == sim.StateDeleted {
		return nil, notFound("SSH key")
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error { r.State = sim.StateDeleted; return nil }); err != nil {
		return nil, errorf(http.StatusInternalServerError, "global/unknown", "%v", err)
	}
	return map[string]any{}, nil
}
