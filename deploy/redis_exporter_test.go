package deploy_test

// redisExporterVersion is the redis_exporter image deploy/redis/exporter.yaml runs.
const redisExporterVersion = "v1.88.0"

// redisExporterMetrics are the redis_exporter metrics the dashboard and the alerts
// may select, as redisExporterVersion names them (exporter/exporter.go's
// metricMapGauges and metricMapCounters, exporter/info.go's instance_info), each
// from a field of INFO:
//
//	redis_up                                          the scrape reached the node
//	redis_instance_info{role}                         role (master, slave)
//	redis_connected_clients, redis_max_clients        connected_clients, maxclients
//	redis_client_recent_max_output_buffer_bytes       client_recent_max_output_buffer
//	redis_mem_clients_normal                          mem_clients_normal
//	redis_client_output_buffer_limit_disconnections_total
//	                                                  client_output_buffer_limit_disconnections
//	                                                  (INFO stats since redis/redis#12476,
//	                                                  after 7.2.0: Redis 7.4 and later;
//	                                                  absent from 7.0.15)
//	redis_cpu_sys_seconds_total, redis_cpu_user_seconds_total
//	                                                  used_cpu_sys, used_cpu_user
//	redis_pubsubshard_channels                        pubsubshard_channels (7.0.3 and later)
//	redis_net_output_bytes_total                      total_net_output_bytes
//
// The exporter runs with CONFIG off (REDIS_EXPORTER_CONFIG_COMMAND=-), so no
// redis_config_* metric exists: limits come from INFO or are the rules' constants.
var redisExporterMetrics = []string{
	"redis_up",
	"redis_instance_info",
	"redis_connected_clients",
	"redis_max_clients",
	"redis_client_recent_max_output_buffer_bytes",
	"redis_mem_clients_normal",
	"redis_client_output_buffer_limit_disconnections_total",
	"redis_cpu_sys_seconds_total",
	"redis_cpu_user_seconds_total",
	"redis_pubsubshard_channels",
	"redis_net_output_bytes_total",
}
