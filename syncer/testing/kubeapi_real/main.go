// slurm-syncer's real Kubernetes API server for tests: the genuine apiextensions-apiserver machinery
// (generic apiserver, etcd storage, watch cache, CRD validation and defaulting) on its own, without a
// kube-apiserver in front of it. Built by syncer/testing/kubeapi_real/build.py; see docs/emulator.md.
//
// The stock main expects to sit behind kube-apiserver (in-cluster config, delegated authn/authz, core
// informers, no root discovery). This one serves alone: anonymous requests, everything authorized, no
// admission, no priority and fairness, no core informers, and root discovery listing the CRD groups.
package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"sync"

	"github.com/spf13/pflag"
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	netutils "k8s.io/utils/net"
)

// noServices answers conversion-webhook lookups: this server has no Services to resolve.
type noServices struct{}

func (noServices) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return nil, fmt.Errorf("service %s/%s: this test API server serves no Services", namespace, name)
}

func config(o *options.CustomResourceDefinitionsServerOptions) (*apiserver.Config, error) {
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts(
		"localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating a self-signed certificate: %w", err)
	}
	generic := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	if err := o.ServerRunOptions.ApplyTo(&generic.Config); err != nil {
		return nil, err
	}
	if err := o.RecommendedOptions.ApplyTo(generic); err != nil {
		return nil, err
	}
	if err := o.APIEnablement.ApplyTo(&generic.Config, apiserver.DefaultAPIResourceConfigSource(), apiserver.Scheme); err != nil {
		return nil, err
	}
	generic.Authentication.Authenticator = anonymous.NewAuthenticator(nil)
	generic.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	// Both OpenAPI versions, as kube-apiserver has: the CRD OpenAPI controllers (which publish each
	// CRD's schema, read by kubectl's client-side validation) run only when v2 is configured too.
	definitions := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
	namer := openapinamer.NewDefinitionNamer(apiserver.Scheme, scheme.Scheme)
	generic.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(definitions, namer)
	generic.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(definitions, namer)
	return &apiserver.Config{
		GenericConfig: generic,
		ExtraConfig: apiserver.ExtraConfig{
			CRDRESTOptionsGetter: options.NewCRDRESTOptionsGetter(
				*o.RecommendedOptions.Etcd, generic.ResourceTransformers, generic.StorageObjectCountTracker),
			ServiceResolver:     noServices{},
			AuthResolverWrapper: webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, generic.LoopbackClientConfig, noopoteltrace.NewTracerProvider()),
		},
	}, nil
}

// rootDiscovery keeps the unaggregated /apis list in step with the established CRDs (kube-apiserver's
// aggregator does this in a cluster; the aggregated form is kept by apiextensions itself).
func rootDiscovery(s *apiserver.CustomResourceDefinitions) {
	informer := s.Informers.Apiextensions().V1().CustomResourceDefinitions()
	var mu sync.Mutex
	listed := map[string]bool{}
	refresh := func(interface{}) {
		mu.Lock()
		defer mu.Unlock()
		crds, err := informer.Lister().List(labels.Everything())
		if err != nil {
			return
		}
		versions := map[string]map[string]bool{}
		for _, crd := range crds {
			if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Served {
					if versions[crd.Spec.Group] == nil {
						versions[crd.Spec.Group] = map[string]bool{}
					}
					versions[crd.Spec.Group][v.Name] = true
				}
			}
		}
		for group := range listed {
			if versions[group] == nil {
				s.GenericAPIServer.DiscoveryGroupManager.RemoveGroup(group)
				delete(listed, group)
			}
		}
		for group, served := range versions {
			names := make([]string, 0, len(served))
			for name := range served {
				names = append(names, name)
			}
			sort.Slice(names, func(i, j int) bool {
				return version.CompareKubeAwareVersionStrings(names[i], names[j]) > 0
			})
			apiGroup := metav1.APIGroup{Name: group}
			for _, name := range names {
				apiGroup.Versions = append(apiGroup.Versions,
					metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + name, Version: name})
			}
			apiGroup.PreferredVersion = apiGroup.Versions[0]
			s.GenericAPIServer.DiscoveryGroupManager.AddGroup(apiGroup)
			listed[group] = true
		}
	}
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    refresh,
		UpdateFunc: func(_, obj interface{}) { refresh(obj) },
		DeleteFunc: refresh,
	})
}

func run() error {
	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	o.RecommendedOptions.Authentication = nil
	o.RecommendedOptions.Authorization = nil
	o.RecommendedOptions.CoreAPI = nil
	o.RecommendedOptions.Admission = nil
	o.RecommendedOptions.Features.EnablePriorityAndFairness = false
	flags := pflag.NewFlagSet("slurm-syncer-kubeapi", pflag.ContinueOnError)
	o.AddFlags(flags)
	if err := flags.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := o.Complete(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := config(o)
	if err != nil {
		return err
	}
	completed := cfg.Complete()
	completed.GenericConfig.EnableDiscovery = true // apiextensions turns it off: it expects an aggregator
	server, err := completed.New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	rootDiscovery(server)
	ctx := genericapiserver.SetupSignalContext()
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

func main() {
	if err := run(); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return // the flags were printed: a check that the binary runs
		}
		fmt.Fprintln(os.Stderr, "slurm-syncer-kubeapi:", err)
		os.Exit(1)
	}
}
