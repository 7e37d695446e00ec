#lang racket/base
;; The blogs of web-server's tutorial, for tests/integration/servlet-nginx-*-test.rkt:
;; prepared as the tutorial says to run them outside DrRacket (iteration-11.rkt, the
;; continuation blog, and iteration-9s.rkt, the stateless one: see prepare-blogs!), and a
;; person's visits to them through the scripted browser (browser.rkt): each step checked,
;; a wrong answer raised with what came back and the end of the server's log.
(require racket/file
         racket/list
         racket/path
         racket/string
         rackunit
         "browser.rkt"
         (only-in "deploy-lib.rkt" raco file-text)
         "lib.rkt")
(provide prepare-blogs!
         current-server-proc
         expect
         expect-page
         expect-detail
         expect-expired
         expect-303
         blog-session
         open-blog
         continue-session
         check-sessions
         check-front-page
         first-post-href
         expect-first-post)

(define examples-dir
  (path-only (collection-file-path "iteration-11.rkt" "web-server" "scribblings" "tutorial" "examples")))

;; prepare-blogs! : path -> (values path path) ; the continuation blog, the stateless one
(define (prepare-blogs! dir)
  (for ([f (in-list '("model-2.rkt" "model-3.rkt"))])
    (copy-file (build-path examples-dir f) (build-path dir f)))
  (define lines (file->lines (build-path examples-dir "iteration-11.rkt")))
  (unless (equal? (car lines) "#lang web-server/insta")
    (error 'prepare-blogs! "iteration-11.rkt no longer starts with #lang web-server/insta: ~s"
           (car lines)))
  (define blog (build-path dir "blog.rkt"))
  (display-lines-to-file (list* "#lang racket" "(require web-server/servlet)"
                                "(provide/contract (start (request? . -> . response?)))"
                                (cdr lines))
                         blog)
  (define stateless (build-path dir "stateless-blog.rkt"))
  ;; As published, every form of iteration-9s.rkt is a 500 on web-server 8.7, under
  ;; serve/servlet too: it gives bytes->string/utf-8 the binding that bindings-assq
  ;; returns, not its value; and its handlers' (redirect/get) raises "Attempt to capture a
  ;; continuation from within an unsafe context". The copy takes the value and answers at
  ;; once instead of redirecting (the request itself for (redirect/get)), so that the
  ;; forms work; the rest is the tutorial's.
  (define source (file->string (build-path examples-dir "iteration-9s.rkt")))
  (define (fix text from to count)
    (unless (= count (length (regexp-match* from text)))
      (error 'prepare-blogs! "iteration-9s.rkt changed: expected ~a matches of ~s" count from))
    (regexp-replace* from text to))
  (define fixed
    (fix (fix source #px"\\(bindings-assq (#\"[a-z]+\") bindings\\)"
              "(binding:form-value (bindings-assq \\1 bindings))" 3)
         #px"\\(redirect/get\\)" "request" 2))
  (call-with-output-file stateless
    (λ (out)
      (write-string fixed out)
      (write-string "\n(provide start)\n" out)))
  (define-values (code out err)
    (run-program raco (list "make" "-j" "2" (path->string blog) (path->string stateless)) #:timeout 120))
  (unless (zero? code) (error 'prepare-blogs! "raco make of the blogs failed:\n~a~a" out err))
  (values blog stateless))

;; The server whose log a failed step shows: a proc, or #f.
(define current-server-proc (make-parameter #f))

;; expect : string any page -> void ; a failed session step, with what came back and the
;; end of the server's log
(define (expect what ok? p)
  (unless ok?
    (error 'session "~a: ~a answered ~a (Location ~a): ~a~a" what (page-path p) (page-status p)
           (page-location p)
           (let ([b (bytes->string/utf-8 (page-body p) #\?)]) (substring b 0 (min 400 (string-length b))))
           (let ([sp (current-server-proc)])
             (if sp
                 (let ([lines (string-split (file-text (proc-stderr-file sp)) "\n")])
                   (string-append "\n--- the server's log, last lines ---\n"
                                  (string-join (take-right lines (min 12 (length lines))) "\n")))
                 "")))))

;; expect-page : string page natural string -> void
(define (expect-page what p status title)
  (expect what (and (= (page-status p) status) (equal? (page-title p) title)) p))

;; expect-detail : string page string string (listof string) -> void ; a post's page
(define (expect-detail what p title body comments)
  (expect-page what p 200 "Post Details")
  (define h2 (page-elements p 'h2))
  (define ps (page-elements p 'p))
  (expect (format "~a: title ~s, body ~s, comments ~s" what title body comments)
          (and (pair? h2) (equal? (element-text (car h2)) title)
               (pair? ps) (equal? (element-text (car ps)) body)
               (equal? (map element-text (page-elements p 'li)) comments))
          p))

;; expect-expired : string page -> void ; serve/servlet's expiration page
(define (expect-expired what p)
  (expect-page what p 200 "Page Has Expired.")
  (expect what (equal? (page-text p) "Sorry, this page has expired. Please go back.") p))

;; expect-303 : string page -> string ; the path of a 303's Location
(define (expect-303 what p)
  (expect what (and (= (page-status p) 303) (page-location p)) p)
  (location-path (page-location p)))

;; post-summary : page string -> (or/c string #f) ; the text of the post's entry
(define (post-summary p title)
  (for/first ([d (in-list (page-elements p 'div))]
              #:when (let ([as (filter (λ (x) (and (pair? x) (eq? (car x) 'a))) (cdr d))])
                       (and (pair? as) (equal? (element-text (car as)) title))))
    (element-text d)))

;; blog-session : port-number string #:live? boolean -> (listof any)
;; A person's visit: the front page; the first post; a new post (and the blog with it);
;; the post's page; a comment, confirmed (and the post with it); back to the blog; then
;; two older URLs again. live?: the continuation blog, which answers a new post and a confirmed comment
;; with a 303 (redirect/get) and reads its data at each page (SQLite), so an old URL shows
;; the comment; else the stateless blog, which answers them at once and carries its data
;; in its URLs, so an old URL shows the post as it was. Raises on the first wrong answer;
;; returns the normalized pages.
(define (blog-session port tag #:live? live?)
  (define pages '())
  (define front (open-blog port (λ (p) (set! pages (cons (normalize-page p) pages)))))
  (append (reverse pages) (continue-session port front tag #:live? live?)))

;; open-blog : port-number [(page -> any)] -> page ; GET /, the front page of a session
(define (open-blog port [keep! void])
  (define front (browse port "/"))
  (keep! front)
  (expect-page "GET /" front 200 "My Blog")
  front)

;; continue-session : port-number page string #:live? boolean -> (listof any)
;; blog-session from its front page on.
(define (continue-session port front tag #:live? live? #:write-lock [lock #f])
  ;; writing : (-> any) -> any ; a request that makes the blog write its data
  (define (writing thunk) (if lock (call-with-semaphore lock thunk) (thunk)))
  (define pages '())
  (define (keep! p) (set! pages (cons (normalize-page p) pages)) p)
  ;; after : string page -> page ; the page a POST or a link led to (through a 303)
  (define (after what p)
    (cond
      [live? (keep! (browse port (expect-303 what p)))]
      [else p]))
  (define title (format "Post ~a" tag))
  (define body (format "Body of ~a: Jörg & <Co>" tag))
  (define comment (format "Comment on ~a, été" tag))
  (define first-post (keep! (browse port (or (find-link front "First Post") "/no-first-post-link"))))
  (expect-detail "the first post" first-post "First Post" "This is my first post" '("First comment!"))
  (define new-post (page-forms front))
  (expect "the front page has one form of two fields"
          (and (= 1 (length new-post)) (= 2 (length (form-fields (car new-post))))) front)
  (define blog
    (after "new post" (keep! (writing (λ () (submit port (car new-post) (list title body)))))))
  (expect-page "the blog after the new post" blog 200 "My Blog")
  (expect "the blog shows the new post"
          (equal? (post-summary blog title) (format "~a ~a 0 comment(s)" title body)) blog)
  (define post-href (find-link blog title))
  (define detail (keep! (browse port post-href)))
  (expect-detail "the new post" detail title body '())
  (define comment-form (page-forms detail))
  (expect "the post's page has one form of one field"
          (and (= 1 (length comment-form)) (= 1 (length (form-fields (car comment-form))))) detail)
  (define confirm (keep! (submit port (car comment-form) (list comment))))
  (expect-page "the comment" confirm 200 "Add a Comment")
  (expect "the confirmation names the comment and the post"
          (equal? (page-text confirm)
                  (format (string-append "Add a Comment The comment: ~a will be added to ~a"
                                         " Yes, add the comment. No, I changed my mind!")
                          comment title))
          confirm)
  (define yes-href (or (find-link confirm "Yes, add the comment.") "/no-yes-link"))
  (define detail2 (after "yes, add the comment" (keep! (writing (λ () (browse port yes-href))))))
  (expect-detail "the post after the comment" detail2 title body (list comment))
  (define back (keep! (browse port (or (find-link detail2 "Back to the blog") "/no-back-link"))))
  (expect-page "back to the blog" back 200 "My Blog")
  (expect "the blog shows the post with its comment"
          (equal? (post-summary back title) (format "~a ~a 1 comment(s)" title body)) back)
  (define again (keep! (browse port post-href)))
  (expect-detail "the post's first URL again" again title body (if live? (list comment) '()))
  (define no (keep! (browse port (or (find-link confirm "No, I changed my mind!") "/no-no-link"))))
  (expect-detail "No, I changed my mind" no title body (if live? (list comment) '()))
  (reverse pages))

;; run-sessions : port-number string natural natural #:live? boolean #:rounds? boolean
;;                -> (values (listof string) (listof string))
;; threads x sessions visits at once; the titles of the posts made and the failures.
;; rounds?: the threads open their front pages together, then all go on together, a
;; session each per round, and one thread at a time sends a request that writes. The
;; stateless blog needs it: it reads its file on GET / and rewrites it on a post or a
;; comment (deleting it, then creating it anew), so a GET / meanwhile can read an empty
;; file, and two writes at once can collide ("open-output-file: file exists"); it raises
;; on both (its races, under serve/servlet too).
(define (run-sessions port prefix threads sessions #:live? live? #:rounds? rounds?)
  (define lock (make-semaphore 1))
  (define titles '())
  (define failures '())
  (define (fail! msg) (call-with-semaphore lock (λ () (set! failures (cons msg failures)))))
  (define (succeed! title) (call-with-semaphore lock (λ () (set! titles (cons title titles)))))
  (define (tag t i) (format "~a-~a-~a" prefix t i))
  ;; all : (natural -> any) -> void ; one thread per client, all waited for (bounded)
  (define (all proc)
    (define ts (for/list ([t (in-range threads)]) (thread (λ () (proc t)))))
    (for ([t (in-list ts)])
      (unless (sync/timeout 90 t)
        (kill-thread t)
        (fail! "a session thread did not finish within 90 s"))))
  ;; guarded : string (-> any) -> any ; a failure is noted, not raised
  (define (guarded tag thunk)
    (with-handlers ([exn:fail? (λ (e) (fail! (format "session ~a: ~a" tag (exn-message e))) #f)])
      (thunk)))
  (define write-lock (make-semaphore 1))
  (cond
    [rounds?
     (for ([i (in-range sessions)])
       (define fronts (make-vector threads #f))
       (all (λ (t) (vector-set! fronts t (guarded (tag t i) (λ () (open-blog port))))))
       (all (λ (t)
              (define front (vector-ref fronts t))
              (when front
                (guarded (tag t i) (λ ()
                                     (continue-session port front (tag t i)
                                                       #:live? live? #:write-lock write-lock)
                                     (succeed! (format "Post ~a" (tag t i)))))))))]
    [else
     (all (λ (t)
            (for ([i (in-range sessions)])
              (guarded (tag t i) (λ ()
                                   (blog-session port (tag t i) #:live? live?)
                                   (succeed! (format "Post ~a" (tag t i))))))))])
  (values titles failures))

;; check-sessions : port-number string #:live? boolean -> (listof string)
(define (check-sessions port prefix #:live? live? #:threads [threads 8] #:sessions [sessions 3])
  (define-values (titles failures)
    (run-sessions port prefix threads sessions #:live? live? #:rounds? (not live?)))
  (check-equal? (length failures) 0
                (format "~a of ~a sessions failed; the first:\n~a" (length failures) (* threads sessions)
                        (string-join (take failures (min 3 (length failures))) "\n")))
  (check-equal? (length titles) (* threads sessions))
  titles)

;; check-front-page : port-number (listof string) -> void ; every post is on the front page
(define (check-front-page port titles)
  (define front (browse port "/"))
  (check-equal? (page-status front) 200)
  (define shown (map car (page-links front)))
  (define missing (filter (λ (t) (not (member t shown))) titles))
  (check-equal? missing '() "posts missing from the front page"))

;; first-post-href : port-number -> string ; a new session's link to "First Post"
(define (first-post-href port)
  (define front (browse port "/"))
  (expect-page "GET /" front 200 "My Blog")
  (define href (find-link front "First Post"))
  (expect "a link to First Post" href front)
  href)

;; expect-first-post : string -> page -> void ; the untouched first post of a fresh blog
(define ((expect-first-post what) p)
  (expect-detail what p "First Post" "This is my first post" '("First comment!")))
