package ttprocessreceiver // import "github.com/ttkit/ttkit/receiver/ttprocessreceiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// NewFactory returns the factory the collector builder registers for the
// ttprocess receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

// cardScraperType names the card-health scraper in the collector's own
// telemetry (otelcol_scraper_*{scraper="ttcard"}).
var cardScraperType = component.MustNewType("ttcard")

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	rCfg := cfg.(*Config)
	s := newScraper(rCfg, set)
	sc, err := scraper.NewMetrics(s.scrape, scraper.WithStart(s.start), scraper.WithShutdown(s.shutdown))
	if err != nil {
		return nil, err
	}
	opts := []scraperhelper.ControllerOption{scraperhelper.AddMetricsScraper(metadata.Type, sc)}
	if rCfg.CardTelemetry.Enabled {
		// A second scraper of the same controller: same cycle, same
		// batch, its own state.
		cs := newCardScraper(rCfg, set)
		csc, err := scraper.NewMetrics(cs.scrape, scraper.WithStart(cs.start), scraper.WithShutdown(cs.shutdown))
		if err != nil {
			return nil, err
		}
		opts = append(opts, scraperhelper.AddMetricsScraper(cardScraperType, csc))
	}
	return scraperhelper.NewMetricsController(&rCfg.ControllerConfig, set, next, opts...)
}
