#lang racket/base
;; The configuration files of the run's fronts and peers, as text: one nginx for every
;; backend (a server block, on its own port, per way of reaching a backend), php-fpm's
;; pool, and HAProxy's fcgi-app for the many-connections scenario.
(require racket/string)
(provide (struct-out front)
         nginx-conf
         php-fpm-conf
         haproxy-conf)

;; A way through nginx: a name (also the upstream's), the port nginx listens on, its kind
;; ('return: answers itself, 'static: serves files from target, 'fastcgi: fastcgi_pass to
;; the servers in target, 'fastcgi-small: the same with nginx's default FastCGI buffers,
;; 'proxy: proxy_pass over HTTP/1.1 to the servers in target), and
;; whether FastCGI connections are kept (upstream keepalive 16 and fastcgi_keep_conn on).
(struct front (name port kind target keep?) #:transparent)

;; nginx-conf : path path (listof front) -> string
;; dir holds nginx's pid and temporary files; php-root is where hello.php is (every
;; FastCGI backend gets the same params, SCRIPT_FILENAME included, so they do the same work).
(define (nginx-conf dir php-root fronts)
  (define (in-dir name) (path->string (build-path dir name)))
  (string-append
   "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\n"
   "worker_rlimit_nofile 8192;\n"
   (format "pid ~a;\nerror_log ~a warn;\n" (in-dir "nginx.pid") (in-dir "nginx-error.log"))
   "events { worker_connections 4096; }\n"
   "http {\n"
   "  access_log off;\n"
   "  default_type application/octet-stream;\n"
   "  sendfile on;\n"
   (format "  client_body_temp_path ~a;\n" (in-dir "client_body"))
   (format "  fastcgi_temp_path ~a;\n" (in-dir "fastcgi_temp"))
   (format "  proxy_temp_path ~a;\n" (in-dir "proxy_temp"))
   (format "  uwsgi_temp_path ~a;\n" (in-dir "uwsgi_temp"))
   (format "  scgi_temp_path ~a;\n" (in-dir "scgi_temp"))
   (string-append*
    (for/list ([f (in-list fronts)] #:when (memq (front-kind f) '(fastcgi fastcgi-small proxy)))
      (format "  upstream ~a {\n~a~a  }\n"
              (front-name f)
              (string-append* (for/list ([s (in-list (front-target f))])
                                (format "    server ~a;\n" s)))
              (if (front-keep? f) "    keepalive 16;\n" ""))))
   (string-append*
    (for/list ([f (in-list fronts)])
      (format "  server {\n    listen 127.0.0.1:~a;\n~a  }\n" (front-port f) (locations f php-root))))
   "}\n"))

;; locations : front path -> string
(define (locations f php-root)
  (case (front-kind f)
    [(return) "    location / {\n      default_type text/plain;\n      return 200 \"Hello, World!\\n\";\n    }\n"]
    [(static) (format "    root ~a;\n" (front-target f))]
    [(proxy)
     (string-append
      "    location / {\n"
      (format "      proxy_pass http://~a;\n" (front-name f))
      "      proxy_http_version 1.1;\n"
      "      proxy_set_header Connection \"\";\n"
      "    }\n")]
    [(fastcgi fastcgi-small)
     (define pass
       (string-append
        "      include /etc/nginx/fastcgi_params;\n"
        (format "      fastcgi_param SCRIPT_FILENAME ~a/hello.php;\n" php-root)
        (format "      fastcgi_pass ~a;\n" (front-name f))
        (if (front-keep? f) "      fastcgi_keep_conn on;\n" "")
        ;; large answers stream through nginx's memory buffers instead of a temp file
        "      fastcgi_max_temp_file_size 0;\n"))
     (string-append
      (format "    location / {\n~a    }\n" pass)
      ;; the large answers are read in 64 KiB pieces (a FastCGI record's size), 1 MiB of
      ;; buffers in all, as a deployment that serves large answers sets them: with nginx's
      ;; default (8 buffers of 4 KiB) a 1 MiB answer is read in 256 pieces, which bounds
      ;; every FastCGI backend. The fastcgi-small fronts keep the default, for comparison;
      ;; the hello-world rows go through `location /` with the default in both.
      (if (eq? (front-kind f) 'fastcgi)
          (format "    location ~~ ^/(1m|16m)$ {\n~a      fastcgi_buffer_size 64k;\n      fastcgi_buffers 16 64k;\n    }\n"
                  pass)
          "")
      ;; the upload streams to the backend as it arrives, with no size limit
      (format "    location = /upload {\n~a      client_max_body_size 0;\n      fastcgi_request_buffering off;\n    }\n"
              pass))]))

;; php-fpm-conf : path string -> string ; pm = static, 4 children, on a unix socket
(define (php-fpm-conf dir socket)
  (string-append
   "[global]\n"
   (format "pid = ~a\nerror_log = ~a\n" (build-path dir "php-fpm.pid") (build-path dir "php-fpm.log"))
   "daemonize = no\n"
   "[bench]\n"
   "user = root\ngroup = root\n"
   (format "listen = ~a\n" socket)
   "listen.mode = 0660\n"
   "pm = static\npm.max_children = 4\n"))

;; haproxy-conf : port-number string path -> string
;; An HTTP front on 127.0.0.1:port and one FastCGI server on the unix socket. Connections
;; to the server stay with their client session (http-reuse never), so N idle clients
;; hold N FastCGI connections: the backend's cost per connection is what is measured.
(define (haproxy-conf port socket docroot)
  (string-append
   "global\n  maxconn 4096\n"
   "defaults\n  mode http\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\n"
   "  timeout http-keep-alive 120s\n"
   (format "frontend fe\n  bind 127.0.0.1:~a\n  default_backend be\n" port)
   (format "backend be\n  use-fcgi-app app\n  http-reuse never\n  server s1 unix@~a proto fcgi maxconn 2000\n"
           socket)
   (format "fcgi-app app\n  docroot ~a\n  option keep-conn\n" docroot)))
