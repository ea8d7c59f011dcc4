package nodeserver

import (
	"net/http"

	"github.com/logbookhq/logbook/internal/rpcmetrics"
	"github.com/logbookhq/logbook/replica"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are registered on a registry owned by one Server (several run in
// one process in tests): no package globals.
type metrics struct {
	reg              *prometheus.Registry
	rpc              *rpcmetrics.Metrics
	packets          prometheus.Counter
	hsyncs           prometheus.Counter
	packetBytes      prometheus.Counter
	readBytes        prometheus.Counter
	checksumErrors   prometheus.Counter
	pipelineFailures *prometheus.CounterVec
	transfers        *prometheus.CounterVec
	badBlocks        prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.rpc = rpcmetrics.New()
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m.packets = counter("logbook_node_packets_received_total", "Write pipeline packets received and written.")
	m.hsyncs = counter("logbook_node_hsyncs_total", "hsync packets: replica data and checksums fsynced before the ack.")
	m.packetBytes = counter("logbook_node_packet_bytes_received_total", "Data bytes in write pipeline packets received (resent bytes included).")
	m.readBytes = counter("logbook_node_read_bytes_sent_total", "Block bytes sent to readers.")
	m.checksumErrors = counter("logbook_node_packet_checksum_errors_total", "Packets refused on arrival because a chunk did not match its checksum.")
	m.badBlocks = counter("logbook_node_bad_blocks_total", "Replicas found corrupt by the scanners or a read.")
	m.pipelineFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "logbook_node_pipeline_failures_total",
		Help: "Write streams that failed, by where: local, downstream, stopped (taken over by a recovery)."}, []string{"where"})
	m.transfers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "logbook_node_transfers_total", Help: "Block transfers sent, by result."}, []string{"result"})
	m.reg.MustRegister(m.rpc.Collectors()...)
	if src := s.cfg.Security.TLS; src != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "logbook_tls_certificate_expiry_timestamp_seconds",
			Help: "When this process's TLS certificate expires, in Unix seconds (only with TLS on)."}, func() float64 { return float64(src.NotAfter().Unix()) }))
	}
	m.reg.MustRegister(m.packets, m.hsyncs, m.packetBytes, m.readBytes, m.checksumErrors, m.badBlocks,
		m.pipelineFailures, m.transfers, &datasetCollector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// datasetCollector reads the dataset's counters, replicas and volumes at
// scrape time.
type datasetCollector struct{ s *Server }

var (
	statCounters = []struct {
		desc *prometheus.Desc
		get  func(replica.Stats) int64
	}{
		{desc("bytes_written_total", "Replica bytes written (resent bytes not counted twice)."), func(s replica.Stats) int64 { return s.BytesWritten }},
		{desc("bytes_read_total", "Replica bytes read (readers, transfers, block scanner)."), func(s replica.Stats) int64 { return s.BytesRead }},
		{desc("checksum_errors_total", "Bad checksums seen by the dataset on write or read."), func(s replica.Stats) int64 { return s.ChecksumErrors }},
		{desc("blocks_created_total", "Replicas created."), func(s replica.Stats) int64 { return s.BlocksCreated }},
		{desc("blocks_finalized_total", "Replicas finalized."), func(s replica.Stats) int64 { return s.BlocksFinalized }},
		{desc("blocks_deleted_total", "Replicas deleted."), func(s replica.Stats) int64 { return s.BlocksDeleted }},
		{desc("volume_failures_total", "Volumes taken out of service."), func(s replica.Stats) int64 { return s.VolumeFailures }},
		{desc("dir_scans_total", "Directory scanner passes."), func(s replica.Stats) int64 { return s.DirScans }},
		{desc("dir_scan_files_total", "Files examined by the directory scanner."), func(s replica.Stats) int64 { return s.DirScanFiles }},
		{desc("dir_scan_fixes_total", "Differences the directory scanner reconciled."), func(s replica.Stats) int64 {
			return s.DirScanMissingMem + s.DirScanMissingDisk + s.DirScanGSFixed + s.DirScanLenFixed + s.DirScanDuplicates + s.DirScanOrphanMeta
		}},
		{desc("blocks_verified_total", "Replicas verified by the block scanner."), func(s replica.Stats) int64 { return s.BlocksVerified }},
		{desc("bytes_verified_total", "Bytes verified by the block scanner."), func(s replica.Stats) int64 { return s.BytesVerified }},
		{desc("corrupt_blocks_total", "Replicas the block scanner found corrupt."), func(s replica.Stats) int64 { return s.CorruptBlocks }},
	}
	cachedBlocksDesc = desc("cached_blocks", "Replicas cached in locked memory.")
	cachedBytesDesc  = desc("cached_bytes", "Bytes cached in locked memory.")
	replicasDesc     = prometheus.NewDesc("logbook_node_replicas", "Replicas by block pool and state.", []string{"pool", "state"}, nil)
	volLabels        = []string{"path", "storage_id", "storage_type"}
	volCapacityDesc  = prometheus.NewDesc("logbook_node_volume_capacity_bytes", "File system size of a volume.", volLabels, nil)
	volAvailableDesc = prometheus.NewDesc("logbook_node_volume_available_bytes", "Space new replicas may use on a volume.", volLabels, nil)
	volUsedDesc      = prometheus.NewDesc("logbook_node_volume_used_bytes", "Replica data and meta bytes on a volume.", volLabels, nil)
	volBlocksDesc    = prometheus.NewDesc("logbook_node_volume_blocks", "Replicas on a volume.", volLabels, nil)
	volFailedDesc    = prometheus.NewDesc("logbook_node_volume_failed", "1 when a volume is out of service.", volLabels, nil)
)

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("logbook_node_"+name, help, nil, nil)
}

func (c *datasetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, sc := range statCounters {
		ch <- sc.desc
	}
	for _, d := range []*prometheus.Desc{cachedBlocksDesc, cachedBytesDesc, replicasDesc, volCapacityDesc, volAvailableDesc, volUsedDesc, volBlocksDesc, volFailedDesc} {
		ch <- d
	}
}

func (c *datasetCollector) Collect(ch chan<- prometheus.Metric) {
	store := c.s.store
	if store == nil {
		return
	}
	st := store.Stats()
	for _, sc := range statCounters {
		ch <- prometheus.MustNewConstMetric(sc.desc, prometheus.CounterValue, float64(sc.get(st)))
	}
	ch <- prometheus.MustNewConstMetric(cachedBlocksDesc, prometheus.GaugeValue, float64(st.BlocksCached))
	ch <- prometheus.MustNewConstMetric(cachedBytesDesc, prometheus.GaugeValue, float64(st.BytesCached))
	for _, pool := range store.BlockPools() {
		infos, err := store.Replicas(pool)
		if err != nil {
			continue
		}
		var counts [replica.StateTemporary + 1]int
		for _, ri := range infos {
			if ri.State <= replica.StateTemporary {
				counts[ri.State]++
			}
		}
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(n), pool, replica.State(state).String())
		}
	}
	for _, v := range store.VolumeInfo() {
		l := []string{v.Path, v.StorageID, v.StorageType.String()}
		failed := 0.0
		if v.Failed {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(volCapacityDesc, prometheus.GaugeValue, float64(v.Capacity), l...)
		ch <- prometheus.MustNewConstMetric(volAvailableDesc, prometheus.GaugeValue, float64(v.Available), l...)
		ch <- prometheus.MustNewConstMetric(volUsedDesc, prometheus.GaugeValue, float64(v.Used), l...)
		ch <- prometheus.MustNewConstMetric(volBlocksDesc, prometheus.GaugeValue, float64(v.NumBlocks), l...)
		ch <- prometheus.MustNewConstMetric(volFailedDesc, prometheus.GaugeValue, failed, l...)
	}
}
