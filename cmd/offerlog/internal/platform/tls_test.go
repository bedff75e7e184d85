package platform_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
)

func TestTLSServesHTTPGRPCAndKafka(t *testing.T) {
	cfg := platformtest.Config(t.TempDir())
	cfg.Insecure = false
	files, err := listener.GenerateTLS(filepath.Join(cfg.DataDir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = files.Cert, files.Key, files.CA
	r := platformtest.Start(t, cfg) // its processors reached the broker over TLS and SASL
	if !r.Info.TLS {
		t.Fatal("info does not say TLS")
	}
	clientTLS, err := streams.ClientTLS(files.CA)
	if err != nil {
		t.Fatal(err)
	}

	// HTTPS with the CA; plain HTTP is not served.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + r.Info.HTTPAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("https healthz: %d", resp.StatusCode)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + r.Info.HTTPAddr + "/healthz"); err == nil && resp.StatusCode == http.StatusOK {
		t.Fatal("plain HTTP was served")
	}

	// gRPC over TLS; a plaintext client fails.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, addr := range []string{r.Info.GRPCAddr, r.Info.CacheAddr} {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
		if err != nil {
			t.Fatal(err)
		}
		h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		cc.Close()
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s over TLS: %v %v", addr, h, err)
		}
		plain, _ := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = healthpb.NewHealthClient(plain).Check(pctx, &healthpb.HealthCheckRequest{})
		pcancel()
		plain.Close()
		if err == nil {
			t.Fatalf("%s served a plaintext gRPC client", addr)
		}
	}

	// Kafka: the properties file says SASL_SSL and names the CA.
	props := r.Info.KafkaConfig
	kc, err := streams.LoadKafkaConfig(props)
	if err != nil {
		t.Fatal(err)
	}
	if kc.Credentials == nil || kc.Credentials.TLS == nil || kc.Credentials.Mechanism != "SCRAM-SHA-512" {
		t.Fatalf("%s: %+v", props, kc.Credentials)
	}
	b, _ := os.ReadFile(props)
	if !strings.Contains(string(b), "security.protocol=SASL_SSL") || !strings.Contains(string(b), "ssl.ca.location="+files.CA) {
		t.Fatalf("%s:\n%s", props, b)
	}
	kcat := testkit.Tool(t, "kcat")
	out, err := exec.Command(kcat, "-F", props, "-L", "-t", "auth.tokens", "-m", "10").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `topic "auth.tokens"`) {
		t.Fatalf("kcat -F %s over SASL_SSL: %v\n%s", props, err, out)
	}
}
