package sonic

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultDBConfig is where SONiC describes its Redis databases
// (sonic-swss-common's SonicDBConfig; hsflowd's HSP_SONIC_DB_JSON).
const DefaultDBConfig = "/var/run/redis/sonic-db/database_config.json"

// The databases the agent reads (database_config.json's DATABASES names).
const (
	ApplDB     = "APPL_DB"
	CountersDB = "COUNTERS_DB"
	ConfigDB   = "CONFIG_DB"
	StateDB    = "STATE_DB"
)

// Instance is one Redis server of database_config.json's INSTANCES.
type Instance struct {
	Hostname     string `json:"hostname"`
	Port         int    `json:"port"`
	UnixSocket   string `json:"unix_socket_path"`
	PasswordPath string `json:"password_path"`
}

// Database is one entry of database_config.json's DATABASES: which
// instance holds it, its database number and its key separator.
type Database struct {
	ID        int    `json:"id"`
	Separator string `json:"separator"`
	Instance  string `json:"instance"`
}

// Topology is database_config.json.
type Topology struct {
	Instances map[string]Instance `json:"INSTANCES"`
	Databases map[string]Database `json:"DATABASES"`
}

// maxDBConfig bounds the file read (SONiC's is about 2 KB).
const maxDBConfig = 1 << 20

// LoadTopology reads database_config.json and checks that the databases
// the agent reads are there, each on a known instance that can be reached
// (a unix socket or host and port).
func LoadTopology(path string) (*Topology, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sonic database config: %w", err)
	}
	defer f.Close()
	var t Topology
	dec := json.NewDecoder(&limitedReader{f, maxDBConfig})
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("sonic database config %s: %w", path, err)
	}
	var errs []error
	for _, name := range []string{ConfigDB, ApplDB, StateDB, CountersDB} {
		db, ok := t.Databases[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no %s in DATABASES", path, name))
			continue
		}
		if db.ID < 0 || db.ID > 15 {
			errs = append(errs, fmt.Errorf("%s: %s id %d outside 0..15", path, name, db.ID))
		}
		if db.Separator == "" {
			errs = append(errs, fmt.Errorf("%s: %s has no separator", path, name))
		}
		in, ok := t.Instances[db.Instance]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s is on instance %q, not in INSTANCES", path, name, db.Instance))
			continue
		}
		if in.UnixSocket == "" && (in.Hostname == "" || in.Port <= 0 || in.Port > 65535) {
			errs = append(errs, fmt.Errorf("%s: instance %q has neither unix_socket_path nor hostname and port", path, db.Instance))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &t, nil
}

// limitedReader fails a read past n bytes instead of truncating.
type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", maxDBConfig)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

// Options returns the go-redis options of database name: the instance's
// unix socket when it has one and unixSock is set (hsflowd's sonic {
// unixsock }, on by default), else its host and port; the password from
// password_path, read now, for AUTH.
func (t *Topology) Options(name string, unixSock bool) (*redis.Options, error) {
	db, ok := t.Databases[name]
	if !ok {
		return nil, fmt.Errorf("no database %s", name)
	}
	in := t.Instances[db.Instance]
	o := &redis.Options{DB: db.ID, Protocol: 2, DisableIdentity: true}
	if in.UnixSocket != "" && (unixSock || in.Hostname == "") {
		o.Network, o.Addr = "unix", in.UnixSocket
	} else {
		o.Network, o.Addr = "tcp", net.JoinHostPort(in.Hostname, strconv.Itoa(in.Port))
	}
	if in.PasswordPath != "" {
		b, err := os.ReadFile(in.PasswordPath)
		if err != nil {
			return nil, fmt.Errorf("%s password: %w", name, err)
		}
		o.Password = strings.TrimRight(string(b), "\r\n")
	}
	return o, nil
}

// Sep returns database name's key separator ("|" or ":").
func (t *Topology) Sep(name string) string { return t.Databases[name].Separator }

// ID returns database name's number.
func (t *Topology) ID(name string) int { return t.Databases[name].ID }
