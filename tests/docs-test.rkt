#lang racket/base
;; The manual and the README against the commands' own --help: every option of
;; `raco fastcgi serve`, `dev` and `request` has an item in the manual that names the same
;; flags and quotes the same help text, the manual has no item for an option that is gone,
;; `ctl`'s options are in its synopsis, and every --flag the README shows exists.
(require racket/list
         racket/port
         racket/string
         racket/system
         rackunit)

(define here (let-values ([(dir _n _d) (split-path (syntax-source #'here))]) dir))
(define cli (path->string (build-path here ".." "fastcgi" "private" "cli" "raco.rkt")))
(define manual (call-with-input-file (build-path here ".." "fastcgi" "scribblings" "fastcgi.scrbl") port->string))
(define readme (call-with-input-file (build-path here ".." "README.md") port->string))
(define racket (find-executable-path (find-system-path 'exec-file)))

;; help-text : string -> string ; `raco fastcgi CMD --help`
(define (help-text cmd)
  (with-output-to-string (λ () (system* racket cli cmd "--help"))))

;; help-options : string -> (listof (cons (listof string) string))
;; Each option's flags (sorted) and its description, lines joined. racket/cmdline prints
;; a flag line at column 2 and description lines at column 5; column 0 holds a mark for
;; options that repeat or exclude each other.
(define (help-options cmd)
  (define lines (string-split (help-text cmd) "\n"))
  (let loop ([ls lines] [acc '()])
    (cond
      [(null? ls) (reverse acc)]
      [(and (> (string-length (car ls)) 3) (char=? (string-ref (car ls) 2) #\-))
       (define flags (sort (for/list ([part (in-list (string-split (substring (car ls) 2) ", "))])
                             (car (string-split part)))
                           string<?))
       (define-values (desc rest)
         (splitf-at (cdr ls) (λ (l) (and (> (string-length l) 5)
                                         (string=? (substring l 1 5) "    ")))))
       (loop rest (if (member (car flags) '("--" "--help" "-h"))
                      acc
                      (cons (cons flags (normalize (string-join (map (λ (l) (substring l 5)) desc) " ")))
                            acc)))]
      [else (loop (cdr ls) acc)])))

;; normalize : string -> string ; flags as typed, one space between words
(define (normalize s)
  (let* ([s (regexp-replace* #rx"@DFlag{([^}]*)}" s "--\\1")]
         [s (regexp-replace* #rx"@Flag{([^}]*)}" s "-\\1")])
    (string-join (string-split s))))

;; section : string -> string ; the manual's subsection with this tag, to the next heading
(define (section tag)
  (define start (cdr (car (regexp-match-positions (regexp (format "@subsection\\[#:tag \"~a\"\\]" tag)) manual))))
  (define end (or (for/first ([p (in-list (regexp-match-positions* #rx"\n@(sub)?section" manual))]
                              #:when (> (car p) start))
                    (car p))
                  (string-length manual)))
  (substring manual start end))

;; manual-items : string -> (listof (cons (listof string) string))
;; The option items of a subsection: the flags before " ---", and the text quoted
;; ``like this'' after it.
(define (manual-items tag)
  (for/list ([m (in-list (regexp-match* #px"@item\\{(@D?Flag\\{[^}]*\\}[^`]*?) ---\\s*``(.*?)''" (section tag)
                                         #:match-select cdr))])
    (cons (sort (for/list ([f (in-list (regexp-match* #rx"@D?Flag{[^}]*}" (car m)))])
                  (normalize f))
                string<?)
          (normalize (cadr m)))))

(for ([cmd (in-list '("serve" "dev" "request"))])
  (test-case (format "raco fastcgi ~a: the manual lists every option with its --help text" cmd)
    (define help (help-options cmd))
    (define items (manual-items cmd))
    (check-true (> (length help) 1) (format "options read from --help: ~s" help))
    (printf "~a: ~a options in --help, ~a items in the manual\n" cmd (length help) (length items))
    (for ([h (in-list help)])
      (define item (assoc (car h) items))
      (check-not-false item (format "~a: no manual item for ~a" cmd (car h)))
      (when item
        (check-equal? (cdr item) (cdr h) (format "~a ~a: manual text against --help" cmd (car h)))))
    (for ([i (in-list items)])
      (check-not-false (assoc (car i) help) (format "~a: manual item for ~a, which --help does not list" cmd (car i))))))

(test-case "raco fastcgi ctl: every long option is in the manual's synopsis"
  (define synopsis (cadr (regexp-match #rx"@commandline{(raco fastcgi ctl [^}]*)}" manual)))
  (define help (help-options "ctl"))
  (check-true (pair? help))
  (for ([h (in-list help)])
    (define long (findf (λ (f) (string-prefix? f "--")) (car h)))
    (check-true (regexp-match? (regexp (string-append "(^| |\\[)" (regexp-quote long) "( |\\]|$)")) synopsis)
                (format "~a not in ~s" long synopsis))))

(test-case "every --flag in the README is an option of some command"
  (define known
    (list* "--help"
     (append* (for/list ([cmd (in-list '("serve" "dev" "request" "ctl"))])
               (append* (map car (help-options cmd)))))))
  (define used (remove-duplicates (regexp-match* #px"(?<![-\\w])--[a-z][a-z-]*" readme)))
  (check-true (pair? used))
  (for ([f (in-list used)])
    (check-not-false (member f known) (format "README shows ~a, which no command takes" f))))

(test-case "the README's layout lists the layers in order, each with every module of its folder, and no module that is gone"
  (define layout (let ([m (regexp-match #rx"\n## Layout\n(.*?)(\n## |$)" readme)]) (and m (cadr m))))
  (check-true (string? layout) "the README has a Layout section")
  (define dir (build-path here ".." "fastcgi" "private"))
  (define layers (map car (call-with-input-file (build-path dir "layers.rktd") read)))
  ;; each layer's bullet: from "- `util/`:" to the next bullet or blank line
  (define bullets
    (for/list ([m (in-list (regexp-match* #rx"\n- `([a-z]+)/`:(.*?)(?=\n- |\n\n)" layout #:match-select values))])
      (cons (cadr m) (caddr m))))
  (check-equal? (map car bullets) layers "the layout's bullets are the folders of layers.rktd, in order")
  (define modules
    (for*/list ([l (in-list layers)] [f (in-list (directory-list (build-path dir l)))]
                #:when (regexp-match? #rx"[.]rkt$" (path->string f)))
      (cons l (path->string f))))
  (for ([lm (in-list modules)])
    (define text (cond [(assoc (car lm) bullets) => cdr] [else ""]))
    (check-true (string-contains? text (string-append "`" (cdr lm) "`"))
                (format "~a/~a is not in its folder's bullet of the layout" (car lm) (cdr lm))))
  (for ([named (in-list (remove-duplicates (map cadr (regexp-match* #rx"`(?:[a-z]+/)?([a-z0-9-]+[.]rkt)`" layout #:match-select values))))]
        #:unless (regexp-match? #rx"-test[.]rkt$" named))  ; the tests the layout names
    (check-true (and (or (member named (map cdr modules)) (member named '("main.rkt" "client.rkt"))) #t)
                (format "the layout names ~a, which fastcgi/private does not have" named))))
