package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"
)

// maxModelBody bounds a model request's body, which the proxy reads to
// find its `model` (dstack's client_max_body_size, 64 MiB).
const maxModelBody = 64 << 20

// modelList is the answer of GET /proxy/models/<project>/models, OpenAI's
// list of models as dstack's model proxy writes it (dstack
// src/dstack/_internal/proxy/lib/routers/model_proxy.py).
type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// models serves dstack's model endpoint, /proxy/models/<project>/…: an
// OpenAI client with that base URL lists the project's models and reaches
// the service that serves the one its request names. Every call needs a
// hoist token, as dstack's needs a project member's.
func (p *serviceProxy) models(c *echo.Context) error {
	if p.svc == nil {
		return echo.NewHTTPError(http.StatusNotFound, "no service proxy in this hoist")
	}
	if err := p.authorize(c, c.Param("project")); err != nil {
		return err
	}
	r := c.Request()
	r.Header.Del("Authorization")
	dropSessionCookie(r)
	project := c.Param("project")
	op := strings.TrimPrefix(c.Param("*"), "v1/") // /v1/… aliases
	switch {
	case op == "models" && r.Method == http.MethodGet:
		svcs, err := p.svc.Models(r.Context(), project)
		if err != nil {
			return err
		}
		out := modelList{Object: "list", Data: []modelInfo{}}
		for _, s := range svcs {
			if s.Model != nil {
				out.Data = append(out.Data, modelInfo{ID: s.Model.Name, Object: "model", OwnedBy: project})
			}
		}
		return c.JSON(http.StatusOK, out)
	case (op == "chat/completions" || op == "completions" || op == "embeddings") && r.Method == http.MethodPost:
		return p.modelCall(c, project, op)
	}
	return echo.NewHTTPError(http.StatusNotFound, "no such model endpoint")
}

// modelCall forwards a POST naming a model to a replica of the service
// that serves it: at the model's prefix for format openai, the answer,
// streamed or not, going back as the replica writes it; through TGI's
// generate API for format tgi (tgiChat).
func (p *serviceProxy) modelCall(c *echo.Context, project, op string) error {
	r := c.Request()
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, maxModelBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "request body too large")
		}
		return echo.NewHTTPError(http.StatusBadRequest, "reading the request body: "+err.Error())
	}
	var req struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "the body must be JSON naming a `model`")
	}
	svcs, err := p.svc.Models(r.Context(), project)
	if err != nil {
		return err
	}
	for _, s := range svcs {
		if s.Model == nil || s.Model.Name != req.Model {
			continue
		}
		switch s.Model.Format {
		case "tgi":
			// dstack's model proxy serves chat completions only for tgi.
			if op != "chat/completions" {
				return echo.NewHTTPError(http.StatusNotFound, "model "+req.Model+" (format tgi) serves chat/completions only")
			}
			p.meter.record(s.Project, s.Run)
			return p.tgiChat(c, s, body)
		case "", "openai":
		default:
			return echo.NewHTTPError(http.StatusNotImplemented, "model "+req.Model+": format "+s.Model.Format+" is not served by hoist")
		}
		prefix := s.Model.Prefix
		if prefix == "" {
			prefix = "/v1"
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		p.meter.record(s.Project, s.Run)
		return p.forward(c, s, strings.TrimRight(prefix, "/")+"/"+op, "")
	}
	return echo.NewHTTPError(http.StatusNotFound, "no model "+req.Model+" in project "+project)
}
