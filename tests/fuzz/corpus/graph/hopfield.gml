„
Creator "attngraph tools/make_hopfield.py: 5 stored patterns and a noisy probe of pattern 2"
graph [
  directed 1
  node [ id 0 label "stored-0" ]
  node [ id 1 label "stored-1" ]
  node [ id 2 label "stored-2" ]
  node [ id 3 label "stored-3" ]
  node [ id 4 label "stored-4" ]
  node [ id 5 label "probe" ]
  edge [ source 0 target 0 ]
  edge [ source 1 target 1 ]
  edge [ source 2 target 2 ]
  edge [ source 3 target 3 ]
  edge [ source 4 target 4 ]
  edge [ source 0 target 5 ]
  edge [ source 1 target 5 ]
  edge [ source 2 target 5 ]
  edge [ source 3 target 5 ]
  edge [ source 4 target 5 ]
]
