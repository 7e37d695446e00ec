// Hello world on Go's standard net/http/fcgi, listening on a unix socket:
//   go-fcgi /path/to.sock
package main

import (
	"log"
	"net"
	"net/http"
	"net/http/fcgi"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: go-fcgi /path/to.sock")
	}
	os.Remove(os.Args[1])
	l, err := net.Listen("unix", os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	hello := []byte("Hello, World!\n")
	log.Fatal(fcgi.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(hello)
	})))
}
